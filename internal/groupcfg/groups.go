package groupcfg

import (
	"iter"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
)

// groupMap holds the groups with overrides of a view, by group id, in an immutable radix tree:
// a change copies only the paths to the groups it touches, and every view shares the rest with
// the one it was made from. The zero value is empty.
type groupMap struct{ t *iradix.Tree[*groupValues] }

// Get returns the values of group id.
func (g groupMap) Get(id string) (*groupValues, bool) {
	if g.t == nil {
		return nil, false
	}
	return g.t.Get([]byte(id))
}

// Len returns the number of groups.
func (g groupMap) Len() int {
	if g.t == nil {
		return 0
	}
	return g.t.Len()
}

// All yields every group, in id order.
func (g groupMap) All() iter.Seq2[string, *groupValues] {
	return func(yield func(string, *groupValues) bool) {
		if g.t == nil {
			return
		}
		it := g.t.Root().Iterator()
		for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
			if !yield(string(k), v) {
				return
			}
		}
	}
}

// Builder returns a builder of the next map, starting from g.
func (g groupMap) Builder() *groupBuilder {
	t := g.t
	if t == nil {
		t = iradix.New[*groupValues]()
	}
	return &groupBuilder{txn: t.Txn()}
}

// groupBuilder makes a groupMap by changes to the one it started from, which it leaves alone.
type groupBuilder struct{ txn *iradix.Txn[*groupValues] }

// Set sets group id's values.
func (b *groupBuilder) Set(id string, v *groupValues) { b.txn.Insert([]byte(id), v) }

// Delete removes group id.
func (b *groupBuilder) Delete(id string) { b.txn.Delete([]byte(id)) }

// Map returns the map made.
func (b *groupBuilder) Map() groupMap { return groupMap{t: b.txn.CommitOnly()} }
