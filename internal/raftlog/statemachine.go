package raftlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// Results of an applied entry, in sm.Result.Value.
const (
	resultAppended  = 1 // the records are in the log, from the entry's expected end offset
	resultConflict  = 2 // the log did not end at the entry's expected end offset: nothing appended
	resultMalformed = 3 // the entry could not be decoded: nothing appended
)

// DefaultSyncInterval is how often a replica that keeps applying entries syncs its log and
// records what it applied (besides the syncs dragonboat asks for before its snapshots). Each sync
// runs on the apply path of its Raft shard: ten seconds wrote 12 % more than one second on three
// nodes, at the cost of a longer sync now and then (docs/benchmarks.md, section 8). A restarted
// replica applies again what it held unsynced, from the Raft log, which keeps it until synced.
const DefaultSyncInterval = 10 * time.Second

// maxQueuedBytes bounds the records a replica keeps in memory for its shard to follow; past it
// the shard reads them back from the log.
const maxQueuedBytes = 64 << 20

// Options configures a StateMachine.
type Options struct {
	// Dir is the directory of the state partition's log.
	Dir string
	// Log configures the log; DeferSync and OwnerFiles are set by the state machine.
	Log statelog.Options
	// ReplicaID is this replica's id in its Raft shard: entries it proposed are not handed back
	// to its shard, which has their records already.
	ReplicaID uint64
	// SyncInterval bounds the time between syncs while entries are applied (0:
	// DefaultSyncInterval).
	SyncInterval time.Duration
	// Fatal is called when the log fails under an applied entry: the replica can neither apply
	// it nor skip it, so the process must stop (nil: panic). dragonboat stops the process on
	// the error that follows if Fatal returns.
	Fatal func(error)
}

// StateMachine is one replica of a state partition, as dragonboat's IOnDiskStateMachine: its
// state is the partition's statelog, to which it appends the records of every committed entry
// whose expected end offset is where the log ends. The log defers its syncs: the Raft log holds
// what the replica applied until a Sync (dragonboat's, before a snapshot, or the replica's own
// every SyncInterval) records the applied index with the log's end in the applied file, and
// dragonboat applies the entries after that index again when the replica restarts.
//
// The replica's shard reads the log through the same value (see Replica): it loads the log,
// follows the records other replicas' leaders append, and proposes its own.
type StateMachine struct {
	logger *zap.Logger
	opts   Options

	mu       sync.Mutex
	log      *statelog.Log
	applied  uint64       // index of the last entry handed to Update
	synced   appliedState // the applied file's content
	lastSync time.Time
	closed   bool
	tail     tail
	scratch  entry
	// generation counts the replacements of the log by a snapshot: a load that read the old
	// log's files while they were replaced saw damage that is not there.
	generation uint64
}

// tail is what the shard has of the log and what it has yet to follow.
type tail struct {
	position int64   // the shard holds the records below it
	queue    []Batch // records others appended past position, in order
	bytes    int
	overflow bool // queue dropped (too large): the shard reads from the log at position
	replaced bool // the log was replaced by a snapshot: the shard loads it again
	inflight *proposal
	nextSeq  uint64
	changed  chan struct{}
}

// Batch is records appended to the log together: Records[i] is at offset First+i.
type Batch struct {
	First   int64
	Records [][]byte
}

// proposal is the shard's entry being committed.
type proposal struct {
	seq      uint64
	expected int64
	records  int
	applied  bool // Update appended it
}

var _ sm.IOnDiskStateMachine = (*StateMachine)(nil)

// NewStateMachine returns the state machine of one replica; dragonboat opens it.
func NewStateMachine(logger *zap.Logger, opts Options) *StateMachine {
	if logger == nil {
		logger = zap.NewNop()
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.Fatal == nil {
		opts.Fatal = func(err error) { panic(err) }
	}
	opts.Log.DeferSync = true
	opts.Log.SyncGroup = nil
	opts.Log.OwnerFiles = OwnerFiles
	opts.Log.TruncateAfter = nil
	return &StateMachine{logger: logger, opts: opts, tail: tail{changed: make(chan struct{}, 1)}}
}

// Prepare opens the replica's log, before the replica starts: dragonboat stops the process when
// Open fails, and a replica whose log cannot be opened must instead stay stopped, its partition
// failed on this node while the other replicas serve it. A log whose replacement by a snapshot
// was interrupted is emptied (applied index 0): dragonboat applies the snapshot again. A new
// replica records that its log is empty at once (the applied file at index 0), so that a log
// found without an applied file is one the replica lost: if the Raft engine remembers the replica
// (known), its log is gone and Prepare fails, since the entries it applied may no longer be in the
// Raft log; otherwise it must be empty, for a log a single node wrote is not a replica's.
func (m *StateMachine) Prepare(known bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log != nil {
		return nil
	}
	fsys, dir := m.fsys(), m.opts.Dir
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	recovering, err := hasFile(fsys, dir, recoveringFileName)
	if err != nil {
		return err
	}
	if recovering {
		m.logger.Warn("the replica's log was being replaced by a snapshot when the process stopped; emptying it to receive the snapshot again")
		if err := m.wipe(); err != nil {
			return err
		}
	}
	st, ok, err := readApplied(fsys, dir)
	if err != nil {
		return err
	}
	if !ok && known {
		return fmt.Errorf("raftlog: %s holds no record of the Raft entries the replica applied, but the Raft engine knows the replica: "+
			"its log was lost, and the entries it applied may be gone from the Raft log; replace the replica", dir)
	}
	o := m.opts.Log
	if ok {
		o.TruncateAfter = &st.end
	}
	l, err := statelog.Open(m.logger, dir, o)
	if err != nil {
		return fmt.Errorf("raftlog: open the log of the replica: %w", err)
	}
	if !ok {
		if l.EndOffset() > 0 || l.StartOffset() > 0 {
			_ = l.Close()
			return fmt.Errorf("raftlog: %s holds a state log of offsets [%d, %d) but no record of the Raft entries it applied: "+
				"it was written by a single-node coordinatord, and a replica's log must start empty", dir, l.StartOffset(), l.EndOffset())
		}
		if err := writeApplied(fsys, dir, st); err != nil {
			_ = l.Close()
			return err
		}
	}
	m.log, m.applied, m.synced, m.lastSync = l, st.index, st, time.Now()
	m.tail.position, m.tail.replaced = l.StartOffset(), true
	m.notify()
	m.logger.Debug("opened the replica's log", zap.Uint64("applied_index", st.index),
		zap.Int64("start_offset", l.StartOffset()), zap.Int64("end_offset", l.EndOffset()))
	return nil
}

// Open returns the index of the last entry the replica's log holds durably, opening the log if
// Prepare has not (as for a replica the Raft engine does not know yet).
func (m *StateMachine) Open(<-chan struct{}) (uint64, error) {
	if err := m.Prepare(false); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied, nil
}

func (m *StateMachine) fsys() statelog.FS {
	if m.opts.Log.FS != nil {
		return m.opts.Log.FS
	}
	return vfs.OS()
}

// wipe empties the log directory of an interrupted snapshot recovery: the log, then the applied
// file records an empty log, then the marker goes.
func (m *StateMachine) wipe() error {
	if err := statelog.Reset(m.logger, m.opts.Dir, m.opts.Log, 0); err != nil {
		return fmt.Errorf("raftlog: empty the replica's log: %w", err)
	}
	if err := writeApplied(m.fsys(), m.opts.Dir, appliedState{}); err != nil {
		return err
	}
	return setMarker(m.fsys(), m.opts.Dir, recoveringFileName, false)
}

// Update appends the records of every entry whose expected end offset is the log's end, in
// order, and answers the others resultConflict (or resultMalformed). It does not sync.
func (m *StateMachine) Update(entries []sm.Entry) ([]sm.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	queued := false
	for i := range entries {
		e := &entries[i]
		value, err := m.apply(e.Index, e.Cmd)
		if err != nil {
			m.opts.Fatal(err)
			return nil, err
		}
		e.Result = sm.Result{Value: value}
		m.applied = e.Index
		queued = queued || value == resultAppended
	}
	if time.Since(m.lastSync) >= m.opts.SyncInterval {
		if err := m.syncLocked(); err != nil {
			m.opts.Fatal(err)
			return nil, err
		}
	}
	if queued {
		m.notify()
	}
	return entries, nil
}

// apply applies one entry, the one at index.
func (m *StateMachine) apply(index uint64, cmd []byte) (uint64, error) {
	e := &m.scratch
	defer func() { clear(e.records) }()
	if err := decodeEntry(cmd, e); err != nil {
		// Every replica decodes the same bytes, so every one skips it.
		m.logger.Error("skipping a malformed replicated entry", zap.Error(err))
		return resultMalformed, nil
	}
	if e.kind == entryKindSeed {
		return m.seed(index, e)
	}
	if end := m.log.EndOffset(); end != e.expectedEnd {
		m.logger.Debug("refusing an entry built on another log", zap.Int64("expected_end", e.expectedEnd), zap.Int64("end", end))
		return resultConflict, nil
	}
	first, err := m.log.Append(e.records)
	if err != nil {
		return 0, fmt.Errorf("raftlog: the replica's log failed under a committed entry, which it can neither apply nor skip: %w", err)
	}
	if p := m.tail.inflight; p != nil && e.proposer == m.opts.ReplicaID && e.seq == p.seq {
		p.applied = true // the shard holds these records
		return resultAppended, nil
	}
	m.enqueue(first, e.records)
	return resultAppended, nil
}

// seed starts a log that was never written with the records of a seed entry at index, from the
// entry's log-start offset (see entry): the log is reset to that offset, the records appended,
// and all of it synced and recorded as applied at once, since a restart truncates the log to the
// end the applied file records, which must not lie below the log-start offset. The recovering
// marker covers the replacement, as for a snapshot: a replica that crashes meanwhile empties
// its log when it restarts and has the entry applied again. The shard loads the new log.
func (m *StateMachine) seed(index uint64, e *entry) (uint64, error) {
	if m.log.StartOffset() != 0 || m.log.EndOffset() != 0 {
		m.logger.Info("refusing to seed a log that holds records", zap.Int64("start_offset", m.log.StartOffset()),
			zap.Int64("end_offset", m.log.EndOffset()))
		return resultConflict, nil
	}
	fail := func(what string, err error) (uint64, error) {
		return 0, fmt.Errorf("raftlog: seed the replica's log from offset %d: %s: %w", e.expectedEnd, what, err)
	}
	fsys, dir := m.fsys(), m.opts.Dir
	if err := setMarker(fsys, dir, recoveringFileName, true); err != nil {
		return fail("mark the replacement", err)
	}
	if err := m.log.Close(); err != nil {
		return fail("close the empty log", err)
	}
	m.log = nil
	if err := statelog.Reset(m.logger, dir, m.opts.Log, e.expectedEnd); err != nil {
		return fail("reset the log", err)
	}
	l, err := statelog.Open(m.logger, dir, m.opts.Log)
	if err != nil {
		return fail("open the log", err)
	}
	m.log = l
	if len(e.records) > 0 {
		if _, err := l.Append(e.records); err != nil {
			return fail("append the records", err)
		}
	}
	if err := l.Sync(); err != nil {
		return fail("sync the log", err)
	}
	st := appliedState{index: index, end: l.EndOffset()}
	if err := writeApplied(fsys, dir, st); err != nil {
		return fail("record the applied index", err)
	}
	if err := setMarker(fsys, dir, recoveringFileName, false); err != nil {
		return fail("clear the replacement's mark", err)
	}
	m.synced, m.lastSync = st, time.Now()
	m.generation++
	t := &m.tail
	t.queue, t.bytes, t.overflow, t.replaced, t.position = nil, 0, false, true, l.StartOffset()
	m.notify()
	m.logger.Info("seeded the replica's log", zap.Uint64("applied_index", index),
		zap.Int64("start_offset", l.StartOffset()), zap.Int64("end_offset", l.EndOffset()))
	return resultAppended, nil
}

// enqueue keeps a copy of records appended at first for the shard to follow.
func (m *StateMachine) enqueue(first int64, records [][]byte) {
	t := &m.tail
	if t.overflow || t.replaced {
		return // the shard reads the log itself
	}
	n := 0
	for _, r := range records {
		n += len(r)
	}
	if t.bytes+n > maxQueuedBytes {
		t.queue, t.bytes, t.overflow = nil, 0, true
		return
	}
	buf := make([]byte, 0, n)
	copied := make([][]byte, len(records))
	for i, r := range records {
		start := len(buf)
		buf = append(buf, r...)
		copied[i] = buf[start:len(buf):len(buf)]
	}
	t.queue = append(t.queue, Batch{First: first, Records: copied})
	t.bytes += n
}

func (m *StateMachine) notify() {
	select {
	case m.tail.changed <- struct{}{}:
	default:
	}
}

// Lookup answers nothing: a replica is read through its shard. dragonboat calls it for a
// linearizable read (SyncRead), which the cluster uses as a barrier.
func (m *StateMachine) Lookup(any) (any, error) { return nil, nil }

// Sync makes the log durable and records the applied index with its end.
func (m *StateMachine) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.syncLocked(); err != nil {
		m.opts.Fatal(err)
		return err
	}
	return nil
}

func (m *StateMachine) syncLocked() error {
	m.lastSync = time.Now()
	st := appliedState{index: m.applied, end: m.log.EndOffset()}
	if st == m.synced {
		return nil
	}
	if err := m.log.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync the replica's log: %w", err)
	}
	if err := writeApplied(m.fsys(), m.opts.Dir, st); err != nil {
		return err
	}
	m.synced = st
	return nil
}

// snapshotState is what PrepareSnapshot captured.
type snapshotState struct {
	snap  *statelog.Snapshot
	index uint64
}

// PrepareSnapshot captures the log as it is, for SaveSnapshot.
func (m *StateMachine) PrepareSnapshot() (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snap, err := m.log.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("raftlog: snapshot the replica's log: %w", err)
	}
	return &snapshotState{snap: snap, index: m.applied}, nil
}

// SaveSnapshot writes the captured log to w (see writeSnapshot), while entries go on being
// applied.
func (m *StateMachine) SaveSnapshot(ctx any, w io.Writer, stopc <-chan struct{}) error {
	st := ctx.(*snapshotState)
	defer st.snap.Close()
	return writeSnapshot(w, st.snap, st.index, stopc)
}

// RecoverFromSnapshot replaces the log with the one another replica sent (a replica too far
// behind the leader's Raft log): the log is reset to the snapshot's log-start offset, filled,
// synced and recorded as applied up to the snapshot's index. The recovering file marks the
// replacement until it is complete. The shard loads the new log.
func (m *StateMachine) RecoverFromSnapshot(r io.Reader, stopc <-chan struct{}) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fsys, dir := m.fsys(), m.opts.Dir
	if m.log != nil {
		if err := m.log.Close(); err != nil {
			m.logger.Warn("closing the replica's log before replacing it failed", zap.Error(err))
		}
		m.log = nil
	}
	if err := setMarker(fsys, dir, recoveringFileName, true); err != nil {
		return err
	}
	st, l, err := readSnapshot(m.logger, r, dir, m.opts.Log, stopc)
	if err != nil {
		if l != nil {
			_ = l.Close()
		}
		return err
	}
	if err := l.Sync(); err != nil {
		_ = l.Close()
		return fmt.Errorf("raftlog: sync the log received in a snapshot: %w", err)
	}
	if err := writeApplied(fsys, dir, st); err != nil {
		_ = l.Close()
		return err
	}
	if err := setMarker(fsys, dir, recoveringFileName, false); err != nil {
		_ = l.Close()
		return err
	}
	m.log, m.applied, m.synced = l, st.index, st
	m.generation++
	t := &m.tail
	t.queue, t.bytes, t.overflow, t.replaced, t.position = nil, 0, false, true, l.StartOffset()
	m.notify()
	m.logger.Info("replaced the replica's log with a snapshot from the leader", zap.Uint64("applied_index", st.index),
		zap.Int64("start_offset", l.StartOffset()), zap.Int64("end_offset", l.EndOffset()))
	return nil
}

// Close syncs and closes the log.
func (m *StateMachine) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.log == nil {
		m.closed = true
		return nil
	}
	m.closed = true
	err := m.syncLocked()
	if cerr := m.log.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		m.logger.Warn("closing the replica's log failed", zap.Error(err))
	}
	return err
}

// ---- the shard's side ----

// errClosed is returned to the shard once the replica is closed.
var errClosed = errors.New("raftlog: the replica is closed")

// load hands the shard every record of the log, from its log-start offset, reading a snapshot
// of it so that entries go on being applied meanwhile; what is applied after the snapshot is
// followed. It returns the log's bounds as the shard now has them.
func (m *StateMachine) load(fn func(offset int64, record []byte) error) (start, end int64, err error) {
	snap, gen, err := m.snapshotForShard(-1)
	if err != nil {
		return 0, 0, err
	}
	defer snap.Close()
	if err := snap.Replay(snap.StartOffset(), fn); err != nil {
		return 0, 0, m.replacedDuring(gen, err)
	}
	return snap.StartOffset(), snap.EndOffset(), nil
}

// ErrReplaced is returned by a read of the log that a snapshot from the leader replaced
// meanwhile: its files changed under the read. Reading again reads the new log.
var ErrReplaced = errors.New("raftlog: the replica's log was replaced by the leader's while it was read")

// replacedDuring returns ErrReplaced instead of err when the log was replaced since generation
// gen: the damage or missing file err reports was the replacement.
func (m *StateMachine) replacedDuring(gen uint64, err error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.generation != gen {
		return fmt.Errorf("%w (%w)", ErrReplaced, err)
	}
	return err
}

// snapshotForShard takes a snapshot of the log and makes its end the shard's position, dropping
// what was queued below it. from ≥ 0 is the position the shard must be at (following after an
// overflow).
func (m *StateMachine) snapshotForShard(from int64) (*statelog.Snapshot, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.log == nil {
		return nil, 0, errClosed
	}
	snap, err := m.log.Snapshot()
	if err != nil {
		return nil, 0, err
	}
	t := &m.tail
	if from >= 0 && from != t.position {
		snap.Close()
		return nil, 0, fmt.Errorf("raftlog: follow from offset %d, but the shard is at %d", from, t.position)
	}
	t.queue, t.bytes, t.overflow, t.replaced, t.position = nil, 0, false, false, snap.EndOffset()
	return snap, m.generation, nil
}

// follow hands the shard the records others appended since its position, in order. reload:
// the log was replaced (by a snapshot, or reopened); the shard must load it again.
func (m *StateMachine) follow(fn func(offset int64, record []byte) error) (reload bool, err error) {
	m.mu.Lock()
	t := &m.tail
	if m.closed {
		m.mu.Unlock()
		return false, errClosed
	}
	if t.replaced {
		m.mu.Unlock()
		return true, nil
	}
	if t.overflow {
		from := t.position
		m.mu.Unlock()
		snap, gen, err := m.snapshotForShard(from)
		if err != nil {
			return false, err
		}
		defer snap.Close()
		if err := snap.Replay(from, fn); err != nil {
			return false, m.replacedDuring(gen, err)
		}
		return false, nil
	}
	queue := t.queue
	t.queue, t.bytes = nil, 0
	pos := t.position
	if n := len(queue); n > 0 {
		last := queue[n-1]
		t.position = max(pos, last.First+int64(len(last.Records)))
	}
	m.mu.Unlock()
	for _, b := range queue {
		for i, r := range b.Records {
			if off := b.First + int64(i); off >= pos {
				if err := fn(off, r); err != nil {
					return false, err
				}
			}
		}
	}
	return false, nil
}

// beginAppend readies the shard's records for a proposal at its position; errBehind when the
// shard has records to follow first, or a log to load.
func (m *StateMachine) beginAppend(records [][]byte) (*proposal, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &m.tail
	switch {
	case m.closed:
		return nil, nil, errClosed
	case len(t.queue) > 0 || t.overflow || t.replaced:
		return nil, nil, ErrBehind
	case t.inflight != nil:
		return nil, nil, errors.New("raftlog: an append is already under way")
	}
	t.nextSeq++
	p := &proposal{seq: t.nextSeq, expected: t.position, records: len(records)}
	t.inflight = p
	cmd := appendEntry(make([]byte, 0, entrySize(records)), &entry{expectedEnd: p.expected, proposer: m.opts.ReplicaID, seq: p.seq, records: records})
	return p, cmd, nil
}

// endAppend ends the proposal p: applied, the shard's position moves past its records.
func (m *StateMachine) endAppend(p *proposal) (applied bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &m.tail
	if t.inflight == p {
		t.inflight = nil
	}
	if p.applied && !t.replaced {
		t.position = max(t.position, p.expected+int64(p.records))
		// Records queued below the new position (none should be) are the shard's already.
		t.queue = slices.DeleteFunc(t.queue, func(b Batch) bool { return b.First+int64(len(b.Records)) <= t.position })
	}
	return p.applied
}

// position is the end of what the shard holds.
func (m *StateMachine) position() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tail.position
}

// setStartOffset prunes the log to off, but not past what is durable: a restart cuts the log to
// the end of the last sync, which must not lie below the log-start offset.
func (m *StateMachine) setStartOffset(off int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.log == nil {
		return 0, errClosed
	}
	if err := m.log.SetStartOffset(min(off, m.synced.end)); err != nil {
		return m.log.StartOffset(), err
	}
	return m.log.StartOffset(), nil
}

// bounds returns the log's offsets and size.
func (m *StateMachine) bounds() (start, end, size int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log == nil {
		return 0, 0, 0
	}
	return m.log.StartOffset(), m.log.EndOffset(), m.log.Size()
}

// AppliedIndex returns the index of the last Raft entry the replica applied.
func (m *StateMachine) AppliedIndex() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied
}

// RemoveLog removes every file of a replica's log directory dir (opts as for NewStateMachine):
// the log of a replica the cluster moved away, or whatever an earlier replica left where a new
// one is to start empty. No replica may have the log open.
func RemoveLog(dir string, opts statelog.Options) error {
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.OS()
	}
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftlog: list %s: %w", dir, err)
	}
	for _, name := range names {
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("raftlog: remove %s: %w", filepath.Join(dir, name), err)
		}
	}
	return fsys.SyncDir(dir)
}
