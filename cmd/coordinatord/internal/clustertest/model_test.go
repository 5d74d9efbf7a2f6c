package clustertest

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The sequential specification the histories are checked against, per share partition (key),
// as the shard implements it (internal/shard/handlers.go writeShareState, and the batch combiner
// of combine.go): every write carries state epoch 1 and leader epoch 0, the key's epochs since
// its one Initialize, so none is fenced; its start offset becomes max(stored, requested); its
// one batch, a single acknowledged offset (delivery state 2, count 1), is merged with the stored
// ones and every offset below the new start offset is dropped. The state is then the start
// offset and the set of offsets of the stored batches, which a read (leader epoch 0, which
// raises nothing) returns. Writing an offset twice changes nothing, so a write the client
// retried, applied once or twice, is one step.

// opKind is the kind of a recorded call.
type opKind uint8

const (
	opWrite opKind = iota
	opRead
)

// opInput is a call of the history.
type opInput struct {
	kind   opKind
	key    int
	start  int64 // write: the start offset sent
	offset int64 // write: the offset of its batch
}

// opOutput is a call's answer.
type opOutput struct {
	// ambiguous: a write that failed, which may or may not have been applied. Its return time
	// is unbounded (porcupine's way for an operation whose outcome is unknown): it can take
	// effect anywhere after its call, including after every other operation, that is never.
	ambiguous bool
	start     int64   // read: the start offset
	offsets   []int64 // read: every offset of the batches, sorted
	// odd: a read returned a batch other than the workload writes (another delivery state or
	// count, an inverted range): no state matches it.
	odd string
}

// keyState is the model's state of one key: its start offset and its stored offsets, sorted,
// all at or above the start offset. Steps return new values; the offsets slice is never changed
// in place.
type keyState struct {
	start   int64
	offsets []int64
}

// applyWrite returns s after a write of offset with start offset start.
func (s keyState) applyWrite(start, offset int64) keyState {
	next := keyState{start: max(s.start, start)}
	next.offsets = make([]int64, 0, len(s.offsets)+1)
	for _, o := range s.offsets {
		if o >= next.start {
			next.offsets = append(next.offsets, o)
		}
	}
	if offset >= next.start {
		if i, found := slices.BinarySearch(next.offsets, offset); !found {
			next.offsets = slices.Insert(next.offsets, i, offset)
		}
	}
	return next
}

func (s keyState) equal(o keyState) bool {
	return s.start == o.start && slices.Equal(s.offsets, o.offsets)
}

func (s keyState) String() string {
	return fmt.Sprintf("start %d %s", s.start, offsetList(s.offsets))
}

// offsetList writes offsets as {a-b, c, ...}.
func offsetList(offsets []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(offsets); {
		j := i
		for j+1 < len(offsets) && offsets[j+1] == offsets[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(offsets[i], 10))
		if j > i {
			b.WriteString("-" + strconv.FormatInt(offsets[j], 10))
		}
		i = j + 1
	}
	b.WriteByte('}')
	return b.String()
}

// shareStateModel is the porcupine model: one partition of the history per key, each starting
// from the state its Initialize left (start offset 0, no batches).
var shareStateModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(opInput).key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]int, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return keyState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(keyState), input.(opInput), output.(opOutput)
		if in.kind == opWrite {
			return true, s.applyWrite(in.start, in.offset)
		}
		return out.odd == "" && s.start == out.start && slices.Equal(s.offsets, out.offsets), s
	},
	Equal: func(a, b any) bool { return a.(keyState).equal(b.(keyState)) },
	Hash: func(state any) uint64 {
		s := state.(keyState)
		h := fnv.New64a()
		fmt.Fprint(h, s.start, s.offsets)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(opInput), output.(opOutput)
		if in.kind == opWrite {
			res := "ok"
			if out.ambiguous {
				res = "failed: applied or not"
			}
			return fmt.Sprintf("write(key %d, start %d, offset %d) → %s", in.key, in.start, in.offset, res)
		}
		if out.odd != "" {
			return fmt.Sprintf("read(key %d) → %s", in.key, out.odd)
		}
		return fmt.Sprintf("read(key %d) → start %d %s", in.key, out.start, offsetList(out.offsets))
	},
	DescribeState: func(state any) string { return state.(keyState).String() },
}
