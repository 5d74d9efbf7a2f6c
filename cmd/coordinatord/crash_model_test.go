package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// The crash suite's reference model of one share partition's state: what Read and
// ReadShareGroupStateSummary must return after the operations applied so far (Kafka's
// ShareCoordinatorShard and PersisterStateBatchCombiner).

// prio is one offset's delivery progress: delivery count, then delivery state (Kafka's
// PersisterStateBatchCombiner).
type prio struct{ count, state int32 }

func (p prio) beats(q prio) bool {
	return p.count > q.count || (p.count == q.count && p.state > q.state)
}

// keyState is the visible state of a key.
type keyState struct {
	exists     bool
	stateEpoch int32
	start      int64
	offsetLE   int32 // the leader epoch ReadShareGroupStateSummary returns
	leaderMax  int32 // the highest leader epoch claimed (fencing); reads above it raise both
	dcc        int32
	offsets    map[int64]prio // never shared between states
}

// absent is the state of a key without state.
func absent() keyState { return keyState{} }

func (s keyState) clone() keyState {
	s.offsets = maps.Clone(s.offsets)
	return s
}

// initialized is s after Initialize(stateEpoch, start) (Kafka's initializeState: a fresh snapshot).
func (s keyState) initialized(stateEpoch int32, start int64) keyState {
	dcc := int32(0)
	if start == -1 {
		dcc = -1
	}
	leaderMax := int32(0)
	if s.exists {
		leaderMax = s.leaderMax
	}
	return keyState{exists: true, stateEpoch: stateEpoch, start: start, leaderMax: leaderMax, dcc: dcc, offsets: map[int64]prio{}}
}

// written is s after a write with the given start offset, delivery complete count and batches
// (Kafka's generateShareStateRecord: start offset never moves back, DCC ordered by start offset;
// PersisterStateBatchCombiner merge).
func (s keyState) written(start int64, dcc int32, batches []*pb.StateBatch) keyState {
	n := s.clone()
	n.start = max(start, s.start)
	switch {
	case start > s.start:
		n.dcc = dcc
	case start == s.start:
		n.dcc = max(dcc, s.dcc)
	}
	for _, b := range batches {
		p := prio{b.GetDeliveryCount(), b.GetDeliveryState()}
		for off := b.GetFirstOffset(); off <= b.GetLastOffset(); off++ {
			if cur, ok := n.offsets[off]; !ok || p.beats(cur) {
				n.offsets[off] = p
			}
		}
	}
	if n.start >= 0 {
		for off := range n.offsets {
			if off < n.start {
				delete(n.offsets, off)
			}
		}
	}
	return n
}

// read is s after a Read with leaderEpoch (a higher epoch is claimed, as Kafka's
// readStateAndMaybeUpdateLeaderEpoch does).
func (s keyState) read(leaderEpoch int32) keyState {
	if !s.exists || leaderEpoch <= s.leaderMax {
		return s
	}
	n := s.clone()
	n.offsetLE, n.leaderMax = leaderEpoch, leaderEpoch
	return n
}

// batches returns the state batches Read must return: sorted, gaps kept, neighbours with equal
// progress coalesced.
func (s keyState) batches() []*pb.StateBatch {
	var out []*pb.StateBatch
	for _, off := range slices.Sorted(maps.Keys(s.offsets)) {
		p := s.offsets[off]
		if n := len(out); n > 0 && out[n-1].LastOffset == off-1 && out[n-1].DeliveryCount == p.count && out[n-1].DeliveryState == p.state {
			out[n-1].LastOffset = off
			continue
		}
		out = append(out, &pb.StateBatch{FirstOffset: off, LastOffset: off, DeliveryState: p.state, DeliveryCount: p.count})
	}
	return out
}

// observed is what the server returned for a key: its summary and, when it has state, its Read.
type observed struct {
	summary *pb.ReadStateSummaryPartitionResult
	read    *pb.ReadStatePartitionResult // nil when not read
}

// mismatch describes how o differs from s ("" when it matches exactly).
func (s keyState) mismatch(o observed) string {
	sum := o.summary
	if sum.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		return fmt.Sprintf("summary answered %v %s", sum.GetErrorCode(), sum.GetErrorMessage())
	}
	if !s.exists {
		if sum.GetStartOffset() != -1 || sum.GetDeliveryCompleteCount() != -1 || sum.GetStateEpoch() != 0 || sum.GetLeaderEpoch() != 0 {
			return fmt.Sprintf("deleted or never initialized, but the summary shows state %v", sum)
		}
		if o.read != nil && o.read.GetErrorCode() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
			return fmt.Sprintf("deleted or never initialized, but Read answered %v", o.read)
		}
		return ""
	}
	var diffs []string
	if sum.GetStateEpoch() != s.stateEpoch {
		diffs = append(diffs, fmt.Sprintf("state epoch %d, want %d", sum.GetStateEpoch(), s.stateEpoch))
	}
	if sum.GetLeaderEpoch() != s.offsetLE {
		diffs = append(diffs, fmt.Sprintf("leader epoch %d, want %d", sum.GetLeaderEpoch(), s.offsetLE))
	}
	if sum.GetStartOffset() != s.start {
		diffs = append(diffs, fmt.Sprintf("start offset %d, want %d", sum.GetStartOffset(), s.start))
	}
	if sum.GetDeliveryCompleteCount() != s.dcc {
		diffs = append(diffs, fmt.Sprintf("delivery complete count %d, want %d", sum.GetDeliveryCompleteCount(), s.dcc))
	}
	if o.read != nil {
		switch {
		case o.read.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE:
			diffs = append(diffs, fmt.Sprintf("Read answered %v %s", o.read.GetErrorCode(), o.read.GetErrorMessage()))
		case !sameBatches(o.read.GetStateBatches(), s.batches()):
			diffs = append(diffs, fmt.Sprintf("state batches %v, want %v", o.read.GetStateBatches(), s.batches()))
		}
	}
	return strings.Join(diffs, "; ")
}

func sameBatches(a, b []*pb.StateBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].GetFirstOffset() != b[i].GetFirstOffset() || a[i].GetLastOffset() != b[i].GetLastOffset() ||
			a[i].GetDeliveryState() != b[i].GetDeliveryState() || a[i].GetDeliveryCount() != b[i].GetDeliveryCount() {
			return false
		}
	}
	return true
}
