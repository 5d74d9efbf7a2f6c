package pmap

import (
	"hash/maphash"
	"iter"
	"math/bits"
	"slices"
)

const (
	bitsPerLevel = 5
	levelMask    = 1<<bitsPerLevel - 1
	// hashBits is the width of a key's hash. A node reached below it holds keys whose hashes are
	// equal, in a list.
	hashBits = 64
)

// seed is chosen once per process and never changes.
var seed = maphash.MakeSeed()

func hashOf(key string) uint64 { return maphash.String(seed, key) }

// Map is an immutable map from strings to V. The zero value is an empty map. Maps are safe for
// concurrent use: nothing changes a Map once it has been returned.
type Map[V any] struct {
	root *node[V]
	len  int
}

// node is a level of the trie: one slot for each 5-bit digit of the hash that some key under it
// has at this level, in digit order (bitmap says which digits). Below hashBits it is a list of
// keys with equal hashes instead, and bitmap is unused.
type node[V any] struct {
	bitmap uint32
	slots  []slot[V]
	// owner is the Builder that created the node and may still change it in place; nil or any
	// other value: the node is shared and is copied before a change.
	owner *owner
}

// slot is a key and its value, or (child != nil) the node of the keys under a digit.
type slot[V any] struct {
	child *node[V]
	hash  uint64
	key   string
	val   V
}

// owner identifies a Builder's generation of nodes; it has a size so that every one is distinct.
type owner struct{ _ byte }

// Len returns the number of keys.
func (m Map[V]) Len() int { return m.len }

// Get returns the value of key, and whether the map holds it. It does not allocate.
func (m Map[V]) Get(key string) (V, bool) { return m.get(hashOf(key), key) }

func (m Map[V]) get(h uint64, key string) (V, bool) {
	var zero V
	n := m.root
	for shift := uint(0); n != nil; shift += bitsPerLevel {
		if shift >= hashBits {
			for i := range n.slots {
				if n.slots[i].key == key {
					return n.slots[i].val, true
				}
			}
			return zero, false
		}
		bit := uint32(1) << (h >> shift & levelMask)
		if n.bitmap&bit == 0 {
			return zero, false
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.child == nil {
			if s.key == key {
				return s.val, true
			}
			return zero, false
		}
		n = s.child
	}
	return zero, false
}

// Set returns a map with key set to val; m is unchanged.
func (m Map[V]) Set(key string, val V) Map[V] {
	b := m.Builder()
	b.Set(key, val)
	return b.Map()
}

// Delete returns a map without key; m is unchanged. Deleting a key m does not hold returns m.
func (m Map[V]) Delete(key string) Map[V] {
	b := m.Builder()
	b.Delete(key)
	return b.Map()
}

// All yields every key and its value, in an unspecified order.
func (m Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m.root != nil {
			m.root.each(yield)
		}
	}
}

func (n *node[V]) each(yield func(string, V) bool) bool {
	for i := range n.slots {
		s := &n.slots[i]
		if s.child != nil {
			if !s.child.each(yield) {
				return false
			}
		} else if !yield(s.key, s.val) {
			return false
		}
	}
	return true
}

// Builder derives a new Map from one by many updates, copying each node of the original at most
// once. A Builder is not safe for concurrent use; the Maps it returns are.
type Builder[V any] struct {
	m     Map[V]
	owner *owner
}

// Builder returns a Builder that starts from m. m itself never changes.
func (m Map[V]) Builder() *Builder[V] { return &Builder[V]{m: m, owner: &owner{}} }

// Len returns the number of keys the map being built holds.
func (b *Builder[V]) Len() int { return b.m.len }

// Get returns the value of key in the map being built.
func (b *Builder[V]) Get(key string) (V, bool) { return b.m.Get(key) }

// Set sets key to val.
func (b *Builder[V]) Set(key string, val V) { b.set(hashOf(key), key, val) }

func (b *Builder[V]) set(h uint64, key string, val V) {
	root := b.m.root
	if root == nil {
		root = &node[V]{owner: b.owner}
	}
	var added bool
	b.m.root, added = root.set(0, slot[V]{hash: h, key: key, val: val}, b.owner)
	if added {
		b.m.len++
	}
}

// Delete removes key, if the map being built holds it.
func (b *Builder[V]) Delete(key string) { b.delete(hashOf(key), key) }

func (b *Builder[V]) delete(h uint64, key string) {
	if b.m.root == nil {
		return
	}
	root, removed := b.m.root.delete(0, h, key, b.owner)
	if !removed {
		return
	}
	b.m.len--
	if b.m.len == 0 {
		root = nil
	}
	b.m.root = root
}

// Map returns the map built so far. Later updates of the Builder do not change it.
func (b *Builder[V]) Map() Map[V] {
	b.owner = &owner{} // the nodes made so far now belong to the returned Map
	return b.m
}

// editable returns n itself if the Builder owning ed made it, or else a copy that ed owns.
func (n *node[V]) editable(ed *owner) *node[V] {
	if n.owner == ed {
		return n
	}
	return &node[V]{bitmap: n.bitmap, slots: slices.Clone(n.slots), owner: ed}
}

// set puts the key and value of leaf under n, which is at level shift, and reports whether the
// key is new. It returns n, changed in place when ed owns it, or its changed copy.
func (n *node[V]) set(shift uint, leaf slot[V], ed *owner) (*node[V], bool) {
	if shift >= hashBits {
		for i := range n.slots {
			if n.slots[i].key == leaf.key {
				c := n.editable(ed)
				c.slots[i].val = leaf.val
				return c, false
			}
		}
		c := n.editable(ed)
		c.slots = append(c.slots, leaf)
		return c, true
	}
	bit := uint32(1) << (leaf.hash >> shift & levelMask)
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		c := n.editable(ed)
		c.slots = slices.Insert(c.slots, i, leaf)
		c.bitmap |= bit
		return c, true
	}
	s := n.slots[i]
	switch {
	case s.child != nil:
		child, added := s.child.set(shift+bitsPerLevel, leaf, ed)
		c := n.editable(ed)
		c.slots[i].child = child
		return c, added
	case s.key == leaf.key:
		c := n.editable(ed)
		c.slots[i].val = leaf.val
		return c, false
	}
	c := n.editable(ed)
	c.slots[i] = slot[V]{child: pair(shift+bitsPerLevel, s, leaf, ed)}
	return c, true
}

// pair returns the node at level shift that holds the two leaves, whose keys differ.
func pair[V any](shift uint, a, b slot[V], ed *owner) *node[V] {
	if shift >= hashBits {
		return &node[V]{slots: []slot[V]{a, b}, owner: ed}
	}
	da, db := a.hash>>shift&levelMask, b.hash>>shift&levelMask
	if da == db {
		return &node[V]{bitmap: 1 << da, slots: []slot[V]{{child: pair(shift+bitsPerLevel, a, b, ed)}}, owner: ed}
	}
	if da > db {
		a, b = b, a
		da, db = db, da
	}
	return &node[V]{bitmap: 1<<da | 1<<db, slots: []slot[V]{a, b}, owner: ed}
}

// delete removes key from under n, which is at level shift, and reports whether it was there.
// A node left with a single key is replaced, in its parent, by that key, so that the trie stays
// as shallow as its keys require.
func (n *node[V]) delete(shift uint, h uint64, key string, ed *owner) (*node[V], bool) {
	if shift >= hashBits {
		for i := range n.slots {
			if n.slots[i].key == key {
				c := n.editable(ed)
				c.slots = slices.Delete(c.slots, i, i+1)
				return c, true
			}
		}
		return n, false
	}
	bit := uint32(1) << (h >> shift & levelMask)
	if n.bitmap&bit == 0 {
		return n, false
	}
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[i]
	if s.child != nil {
		child, removed := s.child.delete(shift+bitsPerLevel, h, key, ed)
		if !removed {
			return n, false
		}
		c := n.editable(ed)
		if len(child.slots) == 1 && child.slots[0].child == nil {
			c.slots[i] = child.slots[0]
		} else {
			c.slots[i].child = child
		}
		return c, true
	}
	if s.key != key {
		return n, false
	}
	c := n.editable(ed)
	c.slots = slices.Delete(c.slots, i, i+1)
	c.bitmap &^= bit
	return c, true
}
