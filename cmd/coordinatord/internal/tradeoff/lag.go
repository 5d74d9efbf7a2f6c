package tradeoff

import (
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// LagStats is the pruning-lag distribution of the records superseded during a measurement (see
// the package documentation), weighted by record.
type LagStats struct {
	Superseded int64 // records superseded during the measurement
	Pinned     int64 // of those, records whose segment was still not deletable at its end

	OffsetsP50, OffsetsP99, OffsetsMax float64 // d − s, deletable records only
	SecondsP50, SecondsP99, SecondsMax float64 // t(d) − t(s), deletable records only
	PinnedSecondsMax                   float64 // the longest wait of a pinned record so far
}

// lagSample is count records of one segment superseded at offset s.
type lagSample struct {
	s     int64
	count int64
}

// segCount is count records of one segment that wait for their share partition's next snapshot.
type segCount struct {
	seg   int
	count int64
}

// keyState is what the analysis keeps per share partition.
type keyState struct {
	lastSnap int64
	pending  []segCount
}

// analysis replays a log's record stream to find when each record is superseded and when its
// segment becomes deletable.
type analysis struct {
	keys    map[record.Key]*keyState
	snaps   []snapEvent // snapshot events in offset order; stale ones skipped lazily
	head    int
	bases   []int64       // base offset of each segment seen
	samples [][]lagSample // per segment
	deleted []int64       // per segment: offset at which it became deletable, -1 until then
	nextDel int           // lowest segment not deletable yet
	lro     int64         // last redundant offset after the last record, -1: none
}

type snapEvent struct {
	ks  *keyState
	off int64
}

// analyzeLog scans the segments of the log in dir and returns the pruning lag of the records
// superseded at offsets in [from, to) whose segment became deletable before offset until, with
// times from tl, and the last redundant offset after the last record (-1: none).
func analyzeLog(logger *zap.Logger, dir string, from, to, until int64, tl *timeline) (LagStats, int64, error) {
	paths, err := datadir.SegmentFiles(dir)
	if err != nil {
		return LagStats{}, 0, fmt.Errorf("analyze %s: %w", dir, err)
	}
	a := &analysis{keys: map[record.Key]*keyState{}, lro: -1}
	for _, p := range paths {
		seg := -1
		err := statelog.Scan(logger, p, statelog.Options{}, func(off int64, rec []byte) error {
			if seg < 0 {
				seg = a.startSegment(off)
			}
			return a.record(seg, off, rec)
		})
		if err != nil {
			return LagStats{}, 0, fmt.Errorf("analyze %s: %w", p, err)
		}
	}
	return a.stats(from, to, until, tl), a.lro, nil
}

func (a *analysis) startSegment(base int64) int {
	a.bases = append(a.bases, base)
	a.samples = append(a.samples, nil)
	a.deleted = append(a.deleted, -1)
	return len(a.bases) - 1
}

func (a *analysis) record(seg int, off int64, raw []byte) error {
	r, err := record.Decode(raw)
	if err != nil {
		return fmt.Errorf("record at offset %d: %w", off, err)
	}
	ks := a.keys[r.Key]
	if ks == nil {
		ks = &keyState{lastSnap: -1}
		a.keys[r.Key] = ks
	}
	if r.Type != record.TypeSnapshot {
		if n := len(ks.pending); n > 0 && ks.pending[n-1].seg == seg {
			ks.pending[n-1].count++
		} else {
			ks.pending = append(ks.pending, segCount{seg, 1})
		}
		return nil
	}
	// A snapshot (or tombstone) supersedes everything the share partition wrote before it.
	for _, p := range ks.pending {
		a.samples[p.seg] = append(a.samples[p.seg], lagSample{s: off, count: p.count})
	}
	ks.pending = append(ks.pending[:0], segCount{seg, 1})
	ks.lastSnap = off
	if r.Tombstone {
		delete(a.keys, r.Key)
		ks.lastSnap = -1 // its events are stale from now on
	} else {
		a.snaps = append(a.snaps, snapEvent{ks, off})
	}
	a.advance(off)
	return nil
}

// advance recomputes the last redundant offset after the record at off and marks the segments
// it has passed as deletable at off.
func (a *analysis) advance(off int64) {
	for a.head < len(a.snaps) && a.snaps[a.head].ks.lastSnap != a.snaps[a.head].off {
		a.head++
	}
	if a.head == len(a.snaps) {
		return
	}
	a.lro = a.snaps[a.head].off
	if a.head > 1<<16 && a.head > len(a.snaps)/2 {
		a.snaps = append(a.snaps[:0], a.snaps[a.head:]...)
		a.head = 0
	}
	for a.nextDel+1 < len(a.bases) && a.lro >= a.bases[a.nextDel+1] {
		a.deleted[a.nextDel] = off
		a.nextDel++
	}
}

// weighted is one lag value with its record count.
type weighted struct {
	v float64
	n int64
}

func quantiles(ws []weighted, total int64) (p50, p99, maxV float64) {
	if total == 0 {
		return 0, 0, 0
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].v < ws[j].v })
	var cum int64
	p50, p99 = -1, -1
	for _, w := range ws {
		cum += w.n
		if p50 < 0 && float64(cum) >= 0.50*float64(total) {
			p50 = w.v
		}
		if p99 < 0 && float64(cum) >= 0.99*float64(total) {
			p99 = w.v
		}
	}
	return p50, p99, ws[len(ws)-1].v
}

func (a *analysis) stats(from, to, until int64, tl *timeline) LagStats {
	var st LagStats
	var offs, secs []weighted
	var deletable int64
	endT := tl.timeOf(until - 1)
	for seg, samples := range a.samples {
		d := a.deleted[seg]
		for _, smp := range samples {
			if smp.s < from || smp.s >= to {
				continue
			}
			st.Superseded += smp.count
			if d < 0 || d >= until {
				st.Pinned += smp.count
				st.PinnedSecondsMax = max(st.PinnedSecondsMax, endT.Sub(tl.timeOf(smp.s)).Seconds())
				continue
			}
			deletable += smp.count
			offs = append(offs, weighted{float64(d - smp.s), smp.count})
			secs = append(secs, weighted{tl.timeOf(d).Sub(tl.timeOf(smp.s)).Seconds(), smp.count})
		}
	}
	st.OffsetsP50, st.OffsetsP99, st.OffsetsMax = quantiles(offs, deletable)
	st.SecondsP50, st.SecondsP99, st.SecondsMax = quantiles(secs, deletable)
	return st
}
