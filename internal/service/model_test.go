package service

import (
	"maps"
	"slices"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// offsetModel is a reference of Kafka's batch combining kept per offset: each offset's (count,
// state), the highest seen, dropped below the start offset. It is slow and obviously right.
type offsetModel struct {
	offsets map[int64][2]int32 // offset → {delivery count, delivery state}
}

func newOffsetModel() *offsetModel { return &offsetModel{offsets: make(map[int64][2]int32)} }

// merge adds batches, then drops every offset below start (-1: none).
func (m *offsetModel) merge(batches []*pb.StateBatch, start int64) {
	for _, b := range batches {
		for off := b.GetFirstOffset(); off <= b.GetLastOffset(); off++ {
			cur, ok := m.offsets[off]
			next := [2]int32{b.GetDeliveryCount(), b.GetDeliveryState()}
			if !ok || next[0] > cur[0] || (next[0] == cur[0] && next[1] > cur[1]) {
				m.offsets[off] = next
			}
		}
	}
	if start >= 0 {
		for off := range m.offsets {
			if off < start {
				delete(m.offsets, off)
			}
		}
	}
}

// batches returns the canonical form: sorted, gaps kept, neighbours with equal values coalesced.
func (m *offsetModel) batches() []*pb.StateBatch {
	var out []*pb.StateBatch
	for _, off := range slices.Sorted(maps.Keys(m.offsets)) {
		v := m.offsets[off]
		if n := len(out); n > 0 && out[n-1].LastOffset == off-1 && out[n-1].DeliveryCount == v[0] && out[n-1].DeliveryState == v[1] {
			out[n-1].LastOffset = off
			continue
		}
		out = append(out, batch(off, off, v[1], v[0]))
	}
	return out
}
