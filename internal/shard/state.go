package shard

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/coordinatord/coordinatord/internal/record"
)

// entry is the state of one share partition: Kafka's shareStateMap value (ShareGroupOffset) plus
// this key's slots of leaderEpochMap, stateEpochMap, snapshotUpdateCount and the offsets manager
// (Kafka's shard state), kept in one compact struct.
type entry struct {
	key         string // the map key (key message bytes); shares the map's string
	batchStore         // batches (the state batches) in their backing array
	startOffset int64
	createTS    int64
	writeTS     int64
	snapOffset  int64 // offset of this key's latest snapshot (offsets manager)
	prev, next  *entry

	snapshotEpoch  int32
	stateEpoch     int32
	leaderEpoch    int32
	dcc            int32
	maxLeaderEpoch int32 // leaderEpochMap
	maxStateEpoch  int32 // stateEpochMap, valid with flagStateEpoch
	updateCount    int32 // snapshotUpdateCount, valid with flagUpdateCount
	flags          uint8
}

const (
	flagStateEpoch  uint8 = 1 << iota // the key has a stateEpochMap value
	flagUpdateCount                   // the key has a snapshotUpdateCount value
	flagInOffsets                     // the key is linked in the offsets list
	flagCanonical                     // batches are sorted, disjoint and coalesced
)

// offsetsList is Kafka's ShareCoordinatorOffsetsManager. Snapshot offsets only grow,
// so keeping the keys in a list ordered by their latest snapshot offset (moving a key to the tail
// on every snapshot) makes the minimum the head: O(1) per snapshot instead of a scan of all keys,
// with the same results.
type offsetsList struct {
	head, tail *entry
	lro        int64 // lastRedundantOffset; math.MaxInt64 until the first snapshot
}

func (l *offsetsList) reset() { *l = offsetsList{lro: math.MaxInt64} }

func (l *offsetsList) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	e.flags &^= flagInOffsets
}

// update records that e's latest snapshot (or tombstone, isDelete) is at off and recomputes the
// last redundant offset; a deleted key stops counting after the computation (KAFKA-19695).
func (l *offsetsList) update(e *entry, off int64, isDelete bool) {
	if e.flags&flagInOffsets != 0 {
		l.unlink(e)
	}
	e.snapOffset = off
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	e.flags |= flagInOffsets
	l.lro = l.head.snapOffset
	if isDelete {
		l.unlink(e)
	}
}

// updateAbsent handles a tombstone for a key that has no state.
func (l *offsetsList) updateAbsent(off int64) {
	if l.head == nil {
		l.lro = off
		return
	}
	l.lro = min(l.head.snapOffset, off)
}

// lastRedundant is the query of Kafka's ShareCoordinatorOffsetsManager: absent when ≤ 0 or never
// set.
func (l *offsetsList) lastRedundant() (int64, bool) {
	if l.lro <= 0 || l.lro == math.MaxInt64 {
		return 0, false
	}
	return l.lro, true
}

// machine is the share-state machine of one state partition (Kafka's ShareCoordinatorShard): the
// state map and the replay rules of Kafka's ShareCoordinatorShard replay. It is owned by one
// goroutine.
type machine struct {
	logger       *zap.Logger
	provider     Provider
	now          func() time.Time
	coldInterval time.Duration
	maxRecord    int

	states  map[string]*entry
	offsets offsetsList
	comb    combiner
	scratch []StateBatch
	skipped map[record.Type]int64 // unknown record types seen during a load
}

// newMachine returns an empty machine. Its log entries are per key, and a single request can name
// hundreds of thousands of keys (a delete of absent keys, a read claiming every share partition of
// a failed-over leader), so they are sampled: every one of the first 100 of a message in a second,
// then one in 100.
func newMachine(logger *zap.Logger, provider Provider, now func() time.Time, coldInterval time.Duration, maxRecord int) *machine {
	logger = logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 100, 100)
	}))
	m := &machine{logger: logger, provider: provider, now: now, coldInterval: coldInterval, maxRecord: maxRecord}
	m.reset()
	return m
}

// reset drops all state (before a reload).
func (m *machine) reset() {
	m.states = make(map[string]*entry)
	m.offsets.reset()
	m.skipped = nil
}

func (m *machine) limit(mk string) int {
	return m.provider.SnapshotUpdateRecordsPerSnapshot(record.GroupOf(mk))
}

// replayRaw replays one encoded record at offset (the load path). Unknown record types are
// skipped; every other decoding error is returned.
func (m *machine) replayRaw(offset int64, raw []byte) error {
	// d is per call, so that nothing keeps raw (the caller's buffer) alive after it.
	var d record.Decoded
	var err error
	m.scratch, err = record.DecodeInto(raw, &d, m.scratch)
	if err != nil {
		if errors.Is(err, record.ErrUnknownRecordType) {
			m.skip(d.Type, offset)
			return nil
		}
		return fmt.Errorf("decode record at offset %d: %w", offset, err)
	}
	e := m.states[string(d.Key)]
	switch {
	case d.Tombstone:
		m.applyTombstone(e, offset)
	case d.Type == record.TypeSnapshot:
		isNew := e == nil
		if isNew {
			e = m.newEntry(string(d.Key))
		}
		m.applySnapshot(e, isNew, &d.Snapshot)
		m.offsets.update(e, offset, false)
	case e == nil: // an update of a key without state
		m.initFromUpdate(m.newEntry(string(d.Key)), &d.Update)
	default:
		m.applyUpdate(e, &d.Update)
	}
	return nil
}

// newEntry adds an empty state for map key mk.
func (m *machine) newEntry(mk string) *entry {
	e := &entry{key: mk}
	m.states[mk] = e
	return e
}

// skip counts a record of unknown type, warning on the first of each type.
func (m *machine) skip(t record.Type, offset int64) {
	if m.skipped == nil {
		m.skipped = make(map[record.Type]int64)
	}
	if m.skipped[t] == 0 {
		m.logger.Warn("skipping record of unknown type", zap.Int16("type", int16(t)), zap.Int64("offset", offset))
	}
	m.skipped[t]++
}

// applySnapshot replays a snapshot value for e (as Kafka's ShareCoordinatorShard replays it); isNew
// tells that e was just created. The offsets manager learns the record's offset from the caller:
// at once on replay, once the log placed the record when the record was just written.
func (m *machine) applySnapshot(e *entry, isNew bool, v *record.SnapshotValue) {
	if isNew || v.LeaderEpoch > e.maxLeaderEpoch {
		e.maxLeaderEpoch = v.LeaderEpoch
	}
	if e.flags&flagStateEpoch == 0 || v.StateEpoch > e.maxStateEpoch {
		e.maxStateEpoch = v.StateEpoch
		e.flags |= flagStateEpoch
	}
	e.snapshotEpoch = v.SnapshotEpoch
	e.stateEpoch = v.StateEpoch
	e.leaderEpoch = v.LeaderEpoch
	e.startOffset = v.StartOffset
	e.dcc = v.DeliveryCompleteCount
	e.createTS = v.CreateTimestamp
	e.writeTS = v.WriteTimestamp
	e.set(v.StateBatches)
	e.setCanonical(canonical(e.batches))
	// A snapshot the limit called for or an Initialize wrote restarts the count, so that exactly
	// limit updates follow it (Kafka restarts only a count that reached the limit, so after a
	// re-Initialize its next snapshot came early). A cold-partition snapshot (its create and
	// write timestamps differ) is a copy for pruning and leaves the count alone, as in Kafka:
	// the cold job skips a state partition whose keys all had one until some key takes a
	// limit-driven snapshot, and restarting the count there would hold that back a whole cycle.
	if v.CreateTimestamp == v.WriteTimestamp || (e.flags&flagUpdateCount != 0 && int(e.updateCount) >= m.limit(e.key)) {
		e.updateCount = 0
		e.flags &^= flagUpdateCount
	}
}

// initFromUpdate makes a new key's state from an update (no snapshot seen): Kafka stores the
// update itself, with state epoch 0 and no timestamps.
func (m *machine) initFromUpdate(e *entry, v *record.UpdateValue) {
	e.maxLeaderEpoch = v.LeaderEpoch
	e.snapshotEpoch = v.SnapshotEpoch
	e.leaderEpoch = v.LeaderEpoch
	e.startOffset = v.StartOffset
	e.dcc = v.DeliveryCompleteCount
	e.set(v.StateBatches)
	e.setCanonical(canonical(e.batches))
	e.updateCount = 1
	e.flags |= flagUpdateCount
}

// applyUpdate merges an update into an existing key (as Kafka's ShareCoordinatorShard replays it).
func (m *machine) applyUpdate(e *entry, v *record.UpdateValue) {
	if v.LeaderEpoch > e.maxLeaderEpoch {
		e.maxLeaderEpoch = v.LeaderEpoch
	}
	if v.StartOffset != -1 {
		e.startOffset = v.StartOffset
	}
	if v.LeaderEpoch != -1 {
		e.leaderEpoch = v.LeaderEpoch
	}
	e.dcc = v.DeliveryCompleteCount
	e.setCanonical(m.comb.mergeInPlace(&e.batchStore, e.flags&flagCanonical != 0, v.StateBatches, e.startOffset))
	if e.flags&flagUpdateCount == 0 {
		e.updateCount = 1
		e.flags |= flagUpdateCount
	} else {
		e.updateCount++
	}
}

// applyTombstone removes a key (e may be nil) and updates the offsets manager.
func (m *machine) applyTombstone(e *entry, offset int64) {
	if e == nil {
		m.offsets.updateAbsent(offset)
		return
	}
	m.offsets.update(e, offset, true)
	delete(m.states, e.key)
}

func (e *entry) setCanonical(ok bool) {
	if ok {
		e.flags |= flagCanonical
	} else {
		e.flags &^= flagCanonical
	}
}

// snapshotOf returns e's state as a snapshot value (batches aliased).
func (e *entry) snapshotOf() record.SnapshotValue {
	return record.SnapshotValue{
		SnapshotEpoch: e.snapshotEpoch, StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch,
		StartOffset: e.startOffset, CreateTimestamp: e.createTS, WriteTimestamp: e.writeTS,
		StateBatches: e.batches, DeliveryCompleteCount: e.dcc,
	}
}

// ---- records produced by operations ----

// recordKind is the metrics type of an appended record.
type recordKind uint8

const (
	kindSnapshot recordKind = iota
	kindUpdate
	kindTombstone
	numKinds
)

func (k recordKind) String() string {
	return [...]string{"snapshot", "update", "tombstone"}[k]
}

// pending collects the encoded records of one group commit, back to back in buf, with what the
// offsets manager learns once the log placed them: for each snapshot or tombstone record, the
// key's entry (nil for updates).
type pending struct {
	buf     []byte
	ends    []int
	kinds   []recordKind
	keys    []string
	entries []*entry
}

// maxRetainedPending bounds the record bytes a pending keeps between commits: a commit of huge
// records would otherwise pin its buffer for the life of the partition.
const maxRetainedPending = 1 << 20

func (p *pending) reset() { p.release() }

// release empties p once its commit is done, dropping a record buffer that grew past
// maxRetainedPending and the keys of the commit's records.
func (p *pending) release() {
	if cap(p.buf) > maxRetainedPending {
		p.buf = nil
	}
	clear(p.keys)
	clear(p.entries)
	p.buf, p.ends, p.kinds, p.keys, p.entries = p.buf[:0], p.ends[:0], p.kinds[:0], p.keys[:0], p.entries[:0]
}

func (p *pending) len() int { return len(p.ends) }

func (p *pending) record(i int) []byte {
	start := 0
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]]
}

// errRecordTooLarge is returned when a generated record exceeds the log's record limit.
type errRecordTooLarge struct{ size, limit int }

func (e errRecordTooLarge) Error() string {
	return fmt.Sprintf("record of %d bytes exceeds the maximum record size of %d bytes", e.size, e.limit)
}

// errStateTooLarge refuses a write that would grow a share partition's state past what one
// snapshot record can hold.
type errStateTooLarge struct{ batches, limit int }

func (e errStateTooLarge) Error() string {
	return fmt.Sprintf("the write would leave the share partition with %d state batches, more than one snapshot record of at "+
		"most %d bytes can hold; acknowledge or archive records, or advance the start offset, to shrink the state first", e.batches, e.limit)
}

// add finishes the record just appended to p.buf (from start) or rolls it back if too large.
func (m *machine) add(p *pending, start int, kind recordKind, mk string) error {
	if size := len(p.buf) - start; m.maxRecord > 0 && size > m.maxRecord {
		p.buf = p.buf[:start]
		return errRecordTooLarge{size: size, limit: m.maxRecord}
	}
	p.ends = append(p.ends, len(p.buf))
	p.kinds = append(p.kinds, kind)
	p.keys = append(p.keys, mk)
	p.entries = append(p.entries, nil)
	return nil
}

// placed tells the offsets manager where the log put records [i, j) of p: from offset first.
// Records are placed in order, so it learns every key's latest snapshot as a replay would.
func (m *machine) placed(p *pending, i, j int, first int64) {
	for k := i; k < j; k++ {
		if e := p.entries[k]; e != nil {
			m.offsets.update(e, first+int64(k-i), p.kinds[k] == kindTombstone)
		}
	}
}

// writeSnapshot encodes a snapshot record for key mk, then replays it (e nil: new key).
func (m *machine) writeSnapshot(p *pending, mk string, e *entry, v *record.SnapshotValue) error {
	start := len(p.buf)
	p.buf = record.AppendSnapshot(p.buf, mk, v)
	if err := m.add(p, start, kindSnapshot, mk); err != nil {
		return err
	}
	isNew := e == nil
	if isNew {
		e = m.newEntry(mk)
	}
	m.applySnapshot(e, isNew, v)
	p.entries[len(p.entries)-1] = e
	return nil
}

// writeUpdate encodes an update record for the existing key e, then replays it.
func (m *machine) writeUpdate(p *pending, e *entry, v *record.UpdateValue) error {
	start := len(p.buf)
	p.buf = record.AppendUpdate(p.buf, e.key, v)
	if err := m.add(p, start, kindUpdate, e.key); err != nil {
		return err
	}
	m.applyUpdate(e, v)
	return nil
}

// writeTombstone encodes a tombstone for the existing key e, then replays it: the key goes now,
// its last offset once the log placed the tombstone.
func (m *machine) writeTombstone(p *pending, e *entry) error {
	start := len(p.buf)
	p.buf = record.AppendTombstone(p.buf, e.key)
	if err := m.add(p, start, kindTombstone, e.key); err != nil {
		return err
	}
	delete(m.states, e.key)
	p.entries[len(p.entries)-1] = e
	return nil
}

// cloneBatches returns an owned copy (nil for none) for results handed to callers.
func cloneBatches(b []StateBatch) []StateBatch {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}
