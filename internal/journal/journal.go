package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// Defaults of Options.
const (
	// DefaultCheckpointInterval is how often the journal checkpoints its logs while it is
	// written to: what a restart after a crash appends again is at most about this much.
	DefaultCheckpointInterval = 10 * time.Second
	// DefaultCheckpointBytes starts a checkpoint early once the journal holds this much.
	DefaultCheckpointBytes = 64 << 20
	// DefaultPreallocateBytes is how much of the first segment Open writes as zeros before the
	// journal is used, when it has no segment file to reuse, and the least the prepared file is
	// made: an fdatasync of data written over blocks the file already has needs no metadata
	// change, and took 119–148 µs at p50 on the benchmark machine where an append took
	// 209–214 µs (docs/benchmarks.md, section 9).
	DefaultPreallocateBytes = 8 << 20
)

// Options configures a Journal. Zero values mean the defaults.
type Options struct {
	FS                 vfs.FS            // nil: the operating system's
	Metrics            *statelog.Metrics // records each round's sync; nil: nothing recorded
	CheckpointInterval time.Duration
	CheckpointBytes    int64
	PreallocateBytes   int64 // negative: none, and no file is prepared (see Journal.prepare)
}

func (o Options) resolve() Options {
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	if o.PreallocateBytes == 0 {
		o.PreallocateBytes = DefaultPreallocateBytes
	}
	return o
}

// ErrClosed is returned by a write to a closed journal.
var ErrClosed = errors.New("journal: closed")

// ErrFailed wraps every error of a journal after a write, sync or checkpoint failed: what it or
// a log holds may be lost, and only a restart, which recovers from what is on disk, goes on.
var ErrFailed = errors.New("journal: failed")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Journal is a node's write-ahead journal of its state logs' appends (see the package doc). It is
// safe for concurrent use.
type Journal struct {
	logger *zap.Logger
	opts   Options
	dir    string

	mu      sync.Mutex
	cond    *sync.Cond
	file    vfs.File // the segment being written
	segment uint64   // its id
	size    int64    // its size
	// extent is how much of the segment's file held written blocks when it became the segment:
	// rounds below it write over them, rounds past it append.
	extent int64
	opened time.Time // when the segment became the one written
	// prepared is the size of the prepared file made ready for the next segment, 0 while there
	// is none: a round that reaches the segment's extent then asks for a checkpoint, which
	// moves to that file instead of appending.
	prepared int64
	pending  []byte // records of the next round
	spare    []byte
	// pendingEnds are the logs' ends the records of the next round reach, in order; journaled
	// is how far each log's frames in the journal reach, once their round is durable.
	pendingEnds []logEnd
	spareEnds   []logEnd
	journaled   map[int]int64
	started     uint64 // rounds started
	finished    uint64 // rounds finished
	running     bool   // a round, or a rotation, is running
	failed      error
	closed      bool
	written     int64 // bytes written since the last checkpoint
	logs        map[int]*Log
	// held are the logs recovery could not open, with the first segment of their frames: the
	// checkpoints keep those segments (see Recover).
	held map[int]uint64

	// rotation serializes the checkpoints and the preparation of the next segment's file: both
	// rename or write the prepared file.
	rotation      sync.Mutex
	checkpointNow chan struct{}
	stop          chan struct{}
	done          chan struct{}
	closeOnce     sync.Once
	closeErr      error
}

// Log is one state log's place in the journal: its statelog.Options.Journal.
// logEnd is how far a journaled frame of log id reaches, and where its record is in the
// pending buffer (its checksum, which covers the segment's id, is set when a round writes it).
type logEnd struct {
	id      int
	end     int64
	at, len int
}

type Log struct {
	j            *Journal
	id           int
	log          atomic.Pointer[statelog.Log]
	checkpointed atomic.Int64
	// tainted: a log this handle journaled for failed (its own write, sync or cut): what it
	// held may not be durable, so no checkpoint may drop the journal's copy.
	tainted atomic.Bool
}

var _ statelog.Journal = (*Log)(nil)

// Open starts the journal in dir, which Recover has emptied (it names the segment to write in
// its checkpoint); a journal whose segment exists already (Recover did not run) is refused.
func Open(logger *zap.Logger, dir string, opts Options) (*Journal, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	opts = opts.resolve()
	cp, ok, err := readCheckpoint(opts.FS, dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("journal: %s holds no checkpoint: recover it first", dir)
	}
	j := &Journal{logger: logger, opts: opts, dir: dir, segment: cp.Segment, logs: map[int]*Log{}, journaled: map[int]int64{}, held: cp.Held,
		checkpointNow: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	j.cond = sync.NewCond(&j.mu)
	if f, err := opts.FS.Open(filepath.Join(dir, segmentName(cp.Segment))); err == nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: %s holds segment %d already: recover it first", dir, cp.Segment)
	}
	if j.file, j.extent, err = openSegment(opts.FS, dir, cp.Segment, opts.PreallocateBytes); err != nil {
		return nil, err
	}
	j.size, j.opened = segmentHeaderSize, time.Now()
	for id, end := range cp.Ends {
		l := j.Log(id)
		l.checkpointed.Store(end)
		j.journaled[id] = end
	}
	go j.checkpointLoop()
	return j, nil
}

// Log returns the journal's handle for state log id (a partition), the same on every call.
func (j *Journal) Log(id int) *Log {
	j.mu.Lock()
	defer j.mu.Unlock()
	l, ok := j.logs[id]
	if !ok {
		l = &Log{j: j, id: id}
		j.logs[id] = l
	}
	return l
}

// ErrHeld is the refusal to open a log whose journaled records recovery could not append (the
// log did not open, or they did not fit it): serving it would serve a state without them.
var ErrHeld = errors.New("journal: the journal holds records of this state log that recovery could not append to it")

// Attach is called by statelog.Open with the log this handle journals; it refuses a held log.
func (l *Log) Attach(log *statelog.Log) error {
	l.j.mu.Lock()
	_, held := l.j.held[l.id]
	l.j.mu.Unlock()
	if held {
		return fmt.Errorf("%w (see the error logged at start-up); repair it and restart the server", ErrHeld)
	}
	if old := l.log.Swap(log); old != nil && old.Failed() {
		l.tainted.Store(true)
	}
	return nil
}

// Checkpointed returns the end offset up to which the log was durable on its own at the last
// checkpoint.
func (l *Log) Checkpointed() int64 { return l.checkpointed.Load() }

// Write appends the log's frame to the journal and returns once a round made it durable.
func (l *Log) Write(frame []byte) error { return l.j.write(l, frame) }

// Record layout: length of the frame (uint32), log id (uint32), CRC-32C of the segment's id, the
// log id and the frame (uint32), the frame. The segment's id in the checksum tells a record from
// what a reused segment file held before: a record of its earlier life does not verify.
const recordHeaderSize = 12

func recordCRC(segment uint64, id, frame []byte) uint32 {
	var seg [8]byte
	binary.LittleEndian.PutUint64(seg[:], segment)
	return crc32.Update(crc32.Update(crc32.Checksum(seg[:], castagnoli), castagnoli, id), castagnoli, frame)
}

func (j *Journal) write(l *Log, frame []byte) error {
	end, ok := statelog.FrameEnd(frame)
	if !ok {
		return fmt.Errorf("journal: state log %d wrote no frame", l.id)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return err
	}
	j.pendingEnds = append(j.pendingEnds, logEnd{id: l.id, end: end, at: len(j.pending), len: recordHeaderSize + len(frame)})
	var h [recordHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(h[4:], uint32(l.id))
	j.pending = append(append(j.pending, h[:]...), frame...)
	target := j.started + 1 // the round that takes pending next
	for {
		switch {
		case j.finished >= target: // durable, even if the journal failed since
			return nil
		case j.failed != nil:
			return j.failure()
		case j.closed:
			return ErrClosed
		case j.running:
			j.cond.Wait()
		default:
			j.gatherLocked(runtime.Gosched)
			j.runRoundLocked()
		}
	}
}

// gatherYields bounds how often a caller about to run a round first lets other goroutines run.
const gatherYields = 8

// gatherLocked lets the writers that are about to queue a frame do so before a round starts,
// with j.mu held on entry and exit (released meanwhile, the round marked running so that no other
// caller starts one). The keys of one request wake a shard each at once; the first to reach the
// journal would otherwise start a round with its frame alone, and every other shard's frame
// would wait for the whole round and the next. So the caller yields the processor, and again as
// long as frames keep coming, up to gatherYields times. With nothing else runnable (one write
// in flight) a yield returns at once.
func (j *Journal) gatherLocked(yield func()) {
	j.running = true
	for i, n := 0, -1; i < gatherYields && len(j.pendingEnds) != n; i++ {
		n = len(j.pendingEnds)
		j.mu.Unlock()
		yield()
		j.mu.Lock()
	}
	j.running = false
}

func (j *Journal) usable() error {
	switch {
	case j.failed != nil:
		return j.failure()
	case j.closed:
		return ErrClosed
	}
	return nil
}

func (j *Journal) failure() error { return fmt.Errorf("%w: %w", ErrFailed, j.failed) }

// runRoundLocked writes and syncs what is pending, with j.mu held on entry and exit (released
// meanwhile).
func (j *Journal) runRoundLocked() {
	j.running = true
	j.started++
	buf, ends := j.pending, j.pendingEnds
	j.pending, j.pendingEnds = j.spare[:0], j.spareEnds[:0]
	f, at, segment := j.file, j.size, j.segment
	j.mu.Unlock()
	began := time.Now()
	for _, e := range ends {
		rec := buf[e.at : e.at+e.len]
		binary.LittleEndian.PutUint32(rec[8:], recordCRC(segment, rec[4:8], rec[recordHeaderSize:]))
	}
	_, err := f.WriteAt(buf, at)
	if err == nil {
		err = f.Sync()
	}
	j.opts.Metrics.ObserveSync(time.Since(began).Seconds())
	j.mu.Lock()
	j.running = false
	if err != nil {
		j.fail(fmt.Errorf("write %d bytes to segment %d: %w", len(buf), j.segment, err))
	} else {
		j.size += int64(len(buf))
		j.written += int64(len(buf))
		j.finished++
		for _, e := range ends {
			j.journaled[e.id] = max(j.journaled[e.id], e.end)
		}
	}
	// The buffer this round wrote becomes the spare, which the next round hands to the writers;
	// one too large to keep is dropped, and the spare is never left as the buffer they fill now.
	j.spare = nil
	if cap(buf) <= 4<<20 {
		j.spare = buf[:0]
	}
	j.spareEnds = ends[:0]
	if j.written >= j.opts.CheckpointBytes || (j.prepared > 0 && j.size >= j.extent) {
		select {
		case j.checkpointNow <- struct{}{}:
		default:
		}
	}
	j.cond.Broadcast()
}

// closing reports whether Close runs the checkpoint.
func (j *Journal) closing() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}

// fail poisons the journal; j.mu is held.
func (j *Journal) fail(err error) {
	if j.failed == nil {
		j.failed = err
		j.logger.Error("the journal failed: every state log fails until the process restarts", zap.Error(err))
	}
}

// checkpointLoop runs the checkpoints, each followed by the preparation of the file the next
// segment will be (the first before any checkpoint).
func (j *Journal) checkpointLoop() {
	defer close(j.done)
	tick := time.NewTicker(j.opts.CheckpointInterval)
	defer tick.Stop()
	j.prepare(j.opts.preparedSize(0, 0))
	for {
		select {
		case <-j.stop:
			return
		case <-tick.C:
		case <-j.checkpointNow:
		}
		closed, err := j.checkpoint()
		if err != nil {
			j.mu.Lock()
			j.fail(err)
			j.cond.Broadcast()
			j.mu.Unlock()
			return
		}
		if closed.bytes > 0 {
			j.prepare(j.opts.preparedSize(closed.bytes, closed.took))
		}
	}
}

// closedSegment is what a checkpoint says of the segment it closed: the bytes of records it
// holds and how long it was the one written (none when the checkpoint did not rotate).
type closedSegment struct {
	bytes int64
	took  time.Duration
}

// preparedSize is the size the prepared file is made, given the segment just closed (none yet:
// bytes 0): what that segment took per CheckpointInterval, and a quarter more, so that the next
// one, at the same rate, writes over blocks its file has until the interval's checkpoint. The
// zeros this costs are a quarter of what the segments hold at a steady rate. At most a quarter
// more than CheckpointBytes, a size that is checkpointed anyway; at least minPreparedBytes (or
// PreallocateBytes if smaller), and PreallocateBytes before the first checkpoint says what the
// rate is.
func (o Options) preparedSize(bytes int64, took time.Duration) int64 {
	hi := o.CheckpointBytes + o.CheckpointBytes/4
	want := o.PreallocateBytes
	if bytes > 0 && took > 0 {
		want = max(int64(float64(bytes)*(float64(o.CheckpointInterval)/float64(took))*1.25), min(minPreparedBytes, o.PreallocateBytes))
	}
	return segmentHeaderSize + min(want, hi)
}

// minPreparedBytes is the least the prepared file is made once the journal's rate is known.
const minPreparedBytes = 1 << 20

// prepare makes the prepared file hold at least size bytes of written, durable blocks (zeros
// past what it holds), creating it if there is none, so that the next segment's rounds write
// over blocks instead of appending (see Options.PreallocateBytes). It runs on the checkpoint
// loop, which alone renames the prepared file, while rounds go on. A failure only leaves the
// journal appending: the file is removed and the next checkpoint prepares one again.
func (j *Journal) prepare(size int64) {
	if j.opts.PreallocateBytes < 0 {
		return
	}
	j.rotation.Lock()
	defer j.rotation.Unlock()
	path := filepath.Join(j.dir, preparedName)
	f, err := j.opts.FS.OpenReadWrite(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = j.opts.FS.Create(path)
	}
	var have int64
	if err == nil {
		have, err = f.Size()
		if err == nil && have < size {
			err = zeroFillUnless(j.stop, f, have, size)
			if err == nil {
				err = f.Sync()
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if errors.Is(err, errStopped) {
		return // Close does not wait for the zeros: the next start finds the file as far as it got
	}
	if err != nil {
		j.logger.Warn("preparing the journal's next segment file failed; the journal appends to its segments until a later checkpoint prepares one",
			zap.Int64("bytes", size), zap.Error(err))
		_ = j.opts.FS.Remove(path)
		return
	}
	j.mu.Lock()
	j.prepared = max(have, size)
	j.mu.Unlock()
}

// checkpoint moves the journal to a new segment, makes every log durable on its own up to the
// end its frames in the older segments reach (a log writes a frame before it journals it, so
// each frame there is in the log's files, which Log.Checkpoint syncs), records those ends with
// the new segment as where recovery starts, and deletes the older segments. The ends are the
// journal's own, taken between rounds, not the logs': a log counts an append in its end only
// once the journal returned, so a frame journaled just before the new segment might be missing
// from the log's end but not from the journal's.
func (j *Journal) checkpoint() (closedSegment, error) {
	j.rotation.Lock()
	defer j.rotation.Unlock()
	j.mu.Lock()
	for j.running {
		j.cond.Wait()
	}
	if j.failed != nil || (j.written == 0 && !j.closed) {
		j.mu.Unlock()
		return closedSegment{}, nil
	}
	j.running = true
	old, oldID := j.file, j.segment
	ends := make(map[int]int64, len(j.journaled))
	for id, end := range j.journaled {
		ends[id] = end
	}
	logs := make(map[int]*Log, len(j.logs))
	for id, l := range j.logs {
		logs[id] = l
	}
	oldSize := j.size
	closed := closedSegment{bytes: oldSize - segmentHeaderSize, took: time.Since(j.opened)}
	j.mu.Unlock()
	next := oldID + 1
	// The segment ends where its records do: a reused or preallocated file holds more, which
	// recovery takes for a torn end, allowed in the last segment only.
	err := old.Truncate(oldSize)
	if err == nil {
		err = old.Sync()
	}
	var f vfs.File
	var extent int64
	if err == nil {
		f, extent, err = openSegment(j.opts.FS, j.dir, next, -1)
	}
	j.mu.Lock()
	if err == nil {
		j.file, j.segment, j.size, j.extent, j.written = f, next, segmentHeaderSize, extent, 0
		j.opened, j.prepared = time.Now(), 0 // the prepared file, if any, is the new segment
	}
	j.running = false
	j.cond.Broadcast()
	j.mu.Unlock()
	if err != nil {
		return closedSegment{}, err
	}
	_ = old.Close()
	cp := checkpointState{Version: checkpointVersion, Segment: next, Ends: map[int]int64{}, Held: j.held}
	for id, l := range logs {
		if l.tainted.Load() {
			return closedSegment{}, fmt.Errorf("journal: state log %d failed, so it may lack appends only the journal holds durably: "+
				"the journal keeps them, and a restart appends them again", id)
		}
		if log := l.log.Load(); log != nil {
			if err := log.Checkpoint(); err != nil {
				return closedSegment{}, fmt.Errorf("journal: checkpoint state log %d (the journal keeps its appends; a restart appends them again): %w", id, err)
			}
		}
		if end, ok := ends[id]; ok {
			cp.Ends[id] = end
		}
	}
	if j.closing() {
		cp.Clean = true
		for _, l := range logs {
			if log := l.log.Load(); log != nil && !log.Closed() {
				cp.Clean = false
			}
		}
	}
	if err := writeCheckpoint(j.opts.FS, j.dir, cp); err != nil {
		return closedSegment{}, err
	}
	for id, end := range cp.Ends {
		logs[id].checkpointed.Store(end)
	}
	return closed, removeSegmentsBelow(j.opts.FS, j.dir, cp.first())
}

// Close checkpoints the journal once more (its logs closed first, so that the next start has
// nothing to append again) and closes it. Later calls return what the first did.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() { j.closeErr = j.close() })
	return j.closeErr
}

func (j *Journal) close() error {
	close(j.stop)
	<-j.done
	j.mu.Lock()
	for j.running {
		j.cond.Wait()
	}
	failed := j.failed
	j.closed = true
	j.mu.Unlock()
	var err error
	if failed == nil {
		_, err = j.checkpoint()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cond.Broadcast()
	if cerr := j.file.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

func segmentName(id uint64) string { return fmt.Sprintf("%020d.journal", id) }

func segmentID(name string) (uint64, bool) {
	if len(name) != 20+len(".journal") || filepath.Ext(name) != ".journal" {
		return 0, false
	}
	id, err := strconv.ParseUint(name[:20], 10, 64)
	return id, err == nil
}

// Segment header: magic, format version, segment id.
const (
	segmentMagic      = "cdjrnl"
	segmentVersion    = 1
	segmentHeaderSize = 16
)

// preparedName is a segment file kept for reuse as the next segment: writes over blocks a file
// has already make its fdatasync cheaper than appends do (see DefaultPreallocateBytes).
const preparedName = "prepared"

// openSegment makes segment id in dir, durable with its header, and returns it open with its
// extent (how much of the file holds written blocks; its records start after the header): the
// prepared file renamed, if there is one, or a new file, with preallocate bytes written as zeros
// (none if not positive).
func openSegment(fsys vfs.FS, dir string, id uint64, preallocate int64) (vfs.File, int64, error) {
	path := filepath.Join(dir, segmentName(id))
	var f vfs.File
	err := fsys.Rename(filepath.Join(dir, preparedName), path)
	if err == nil {
		f, err = fsys.OpenReadWrite(path)
	} else if errors.Is(err, fs.ErrNotExist) {
		f, err = fsys.Create(path)
		if err == nil && preallocate > segmentHeaderSize {
			err = zeroFill(f, segmentHeaderSize, preallocate)
		}
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		return nil, 0, fmt.Errorf("journal: create %s: %w", path, err)
	}
	var h [segmentHeaderSize]byte
	copy(h[:], segmentMagic)
	binary.LittleEndian.PutUint16(h[6:], segmentVersion)
	binary.LittleEndian.PutUint64(h[8:], id)
	if _, err = f.WriteAt(h[:], 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	var extent int64
	if err == nil {
		extent, err = f.Size()
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("journal: create %s: %w", path, err)
	}
	return f, extent, nil
}

// zeroFill writes zeros to f from from to size.
func zeroFill(f vfs.File, from, size int64) error { return zeroFillUnless(nil, f, from, size) }

// errStopped ends a zeroFillUnless whose stop channel closed.
var errStopped = errors.New("journal: stopped")

// zeroFillUnless writes zeros to f from from to size, a MiB at a time, and returns errStopped
// between two of them once stop is closed.
func zeroFillUnless(stop <-chan struct{}, f vfs.File, from, size int64) error {
	zeros := make([]byte, min(size-from, 1<<20))
	for at := from; at < size; at += int64(len(zeros)) {
		select {
		case <-stop:
			return errStopped
		default:
		}
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-at)], at); err != nil {
			return err
		}
	}
	return nil
}

// removeSegmentsBelow deletes the segments of ids below id; the newest of them becomes the
// prepared file, if there is none or the newest is larger (more blocks to write over: the
// segment a clean Close starts is the prepared file it renamed, where the prepared file it leaves
// is the last segment cut to its records).
func removeSegmentsBelow(fsys vfs.FS, dir string, id uint64) error {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("journal: list %s: %w", dir, err)
	}
	var old []string
	keepPrepared := false
	for _, name := range names {
		if sid, ok := segmentID(name); ok && sid < id {
			old = append(old, name)
		}
		keepPrepared = keepPrepared || name == preparedName
	}
	if len(old) == 0 {
		return nil
	}
	if keepPrepared {
		larger, err := largerFile(fsys, filepath.Join(dir, old[len(old)-1]), filepath.Join(dir, preparedName))
		if err != nil {
			return fmt.Errorf("journal: compare %s with the prepared file: %w", old[len(old)-1], err)
		}
		keepPrepared = !larger
	}
	if !keepPrepared {
		last := old[len(old)-1] // names sort by id
		if err := fsys.Rename(filepath.Join(dir, last), filepath.Join(dir, preparedName)); err != nil {
			return fmt.Errorf("journal: keep %s for reuse: %w", last, err)
		}
		old = old[:len(old)-1]
	}
	for _, name := range old {
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("journal: remove %s: %w", name, err)
		}
	}
	return fsys.SyncDir(dir)
}

// largerFile reports whether the file a is larger than the file b.
func largerFile(fsys vfs.FS, a, b string) (bool, error) {
	sa, err := vfs.FileSize(fsys, a)
	if err != nil {
		return false, err
	}
	sb, err := vfs.FileSize(fsys, b)
	if err != nil {
		return false, err
	}
	return sa > sb, nil
}
