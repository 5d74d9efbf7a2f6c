package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

const journalDir = "/data/journal"

func logDir(id int) string { return filepath.Join("/data", fmt.Sprintf("p-%d", id)) }

func logDirs(n int) map[int]string {
	dirs := map[int]string{}
	for id := range n {
		dirs[id] = logDir(id)
	}
	return dirs
}

// syncsFailingIn wraps fsys so that syncs of files in dir fail while the flag returned is set.
func syncsFailingIn(fsys *faultfs.CrashFS, dir string) (*faultfs.FS, *atomic.Bool) {
	failSyncs := new(atomic.Bool)
	return faultfs.Wrap(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if failSyncs.Load() && op.Kind == faultfs.OpSync && filepath.Dir(op.Path) == dir {
			return errors.New("injected EIO")
		}
		return nil
	})), failSyncs
}

// node is a test node: n logs in one journal on fsys.
type node struct {
	t    *testing.T
	j    *Journal
	logs []*statelog.Log
}

// openNode recovers and opens n logs and their journal on fsys (a crash file system, or one
// injecting faults into it).
func openNode(t *testing.T, fsys vfs.FS, n int, opts Options) *node {
	t.Helper()
	return openNodeSegments(t, fsys, n, opts, 4096)
}

// openNodeSegments is openNode with logs that roll at segmentBytes.
func openNodeSegments(t *testing.T, fsys vfs.FS, n int, opts Options, segmentBytes int64) *node {
	t.Helper()
	logger := zaptest.NewLogger(t)
	lo := statelog.Options{FS: fsys, SegmentBytes: segmentBytes}
	if _, err := Recover(logger, journalDir, logDirs(n), lo, fsys); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	opts.FS = fsys
	j, err := Open(logger, journalDir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	nd := &node{t: t, j: j}
	for id := range n {
		o := lo
		o.Journal = j.Log(id)
		l, err := statelog.Open(logger, logDir(id), o)
		if err != nil {
			t.Fatalf("open log %d: %v", id, err)
		}
		nd.logs = append(nd.logs, l)
	}
	return nd
}

func (nd *node) close() {
	for _, l := range nd.logs {
		if err := l.Close(); err != nil {
			nd.t.Errorf("close log: %v", err)
		}
	}
	if err := nd.j.Close(); err != nil {
		nd.t.Errorf("close journal: %v", err)
	}
}

// contents returns every record of log id with its offset, reading it as a new Open would.
func contents(t *testing.T, fsys *faultfs.CrashFS, id int) (start int64, recs []string) {
	t.Helper()
	l, err := statelog.Load(zaptest.NewLogger(t), logDir(id), statelog.Options{FS: fsys, SegmentBytes: 4096}, func(off int64, r []byte) error {
		recs = append(recs, fmt.Sprintf("%d:%s", off, r))
		return nil
	})
	if err != nil {
		t.Fatalf("load log %d: %v", id, err)
	}
	start = l.StartOffset()
	_ = l.Close()
	return start, recs
}

// Concurrent appends to many logs, checkpoints and prunes meanwhile, then a power cut at a random
// moment: after Recover, every log holds every append acknowledged before the cut, at its offset,
// and nothing else but appends that were under way. Checkpoints come by size and by interval,
// or (the seeds' second half) when a segment reaches the extent of its small prepared file.
func TestPowerCutKeepsAcknowledgedAppends(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			fsys := faultfs.NewCrashFS()
			const logs = 4
			opts := Options{CheckpointInterval: time.Millisecond, CheckpointBytes: 2048}
			if seed >= 8 {
				opts = Options{CheckpointInterval: 5 * time.Millisecond, CheckpointBytes: 1 << 20, PreallocateBytes: 2048}
			}
			// Logs that roll every 4 KiB write their frames out at each roll; larger ones keep
			// them until a checkpoint (or 64 KiB of them), so that a cut finds most of them only
			// in the journal.
			segmentBytes := int64(4096)
			if seed%4 >= 2 {
				segmentBytes = 1 << 20
			}
			nd := openNodeSegments(t, fsys, logs, opts, segmentBytes)
			var acked [logs]atomic.Int64 // appends acknowledged, per log: records [0, acked)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for id := range logs {
				wg.Go(func() {
					l := nd.logs[id]
					for i := int64(0); ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := l.Append([][]byte{fmt.Appendf(nil, "r%d", i)}); err != nil {
							t.Errorf("append to log %d: %v", id, err)
							return
						}
						acked[id].Store(i + 1)
						if i%37 == 36 {
							if err := l.SetStartOffset(i - 20); err != nil {
								t.Errorf("prune log %d: %v", id, err)
								return
							}
						}
					}
				})
			}
			time.Sleep(time.Duration(5+rng.IntN(40)) * time.Millisecond)
			var before [logs]int64
			for id := range logs {
				before[id] = acked[id].Load()
			}
			crashed := fsys.CrashClone(faultfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, 2)), ZeroFill: seed%2 == 0})
			close(stop)
			wg.Wait()
			nd.close()

			after := openNode(t, crashed, logs, Options{})
			after.close()
			for id := range logs {
				start, recs := contents(t, crashed, id)
				if int64(len(recs))+start < before[id] {
					t.Fatalf("log %d ends at %d after the cut, but %d appends were acknowledged", id, int64(len(recs))+start, before[id])
				}
				for i, r := range recs {
					off := start + int64(i)
					if want := fmt.Sprintf("%d:r%d", off, off); r != want {
						t.Fatalf("log %d holds %q at offset %d, want %q", id, r, off, want)
					}
				}
			}
		})
	}
}

// A clean shutdown leaves nothing to append again, and the logs hold everything.
func TestCloseCheckpoints(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	nd := openNode(t, fsys, 2, Options{})
	for i := range 10 {
		if _, err := nd.logs[i%2].Append([][]byte{fmt.Appendf(nil, "r%d", i/2)}); err != nil {
			t.Fatal(err)
		}
	}
	nd.close()
	if err := nd.j.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	cp, ok, err := readCheckpoint(fsys, journalDir)
	if err != nil || !ok || cp.Ends[0] != 5 || cp.Ends[1] != 5 || !cp.Clean {
		t.Fatalf("checkpoint after close: %+v %v %v; want both logs at 5, clean", cp, ok, err)
	}
	frames, _, err := readFrames(zaptest.NewLogger(t), fsys, journalDir, cp.Segment, 0)
	if err != nil || len(frames) != 0 {
		t.Fatalf("the journal holds %d logs' frames after a clean close (%v), want none", len(frames), err)
	}
	crashed := fsys.CrashClone(faultfs.CrashOptions{})
	// A start after it trusts the logs, and its own checkpoint is not clean: a crash before the
	// next one must recover them.
	if _, err := Recover(zaptest.NewLogger(t), journalDir, logDirs(2), statelog.Options{FS: crashed, SegmentBytes: 4096}, crashed); err != nil {
		t.Fatal(err)
	}
	if cp, _, err := readCheckpoint(crashed, journalDir); err != nil || cp.Clean || cp.Ends[0] != 5 {
		t.Fatalf("checkpoint after a recovery: %+v %v; want both logs at 5, not clean", cp, err)
	}
	openNode(t, crashed, 2, Options{}).close()
	for id := range 2 {
		if _, recs := contents(t, crashed, id); !slices.Equal(recs, []string{"0:r0", "1:r1", "2:r2", "3:r3", "4:r4"}) {
			t.Fatalf("log %d holds %v", id, recs)
		}
	}
}

// A failed journal sync fails the append and every later one, and no log holds the record.
func TestFailedSyncPoisons(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	inj, failSyncs := syncsFailingIn(fsys, journalDir)
	nd := openNode(t, inj, 2, Options{})
	j, l, other := nd.j, nd.logs[0], nd.logs[1]
	if _, err := l.Append([][]byte{[]byte("ok")}); err != nil {
		t.Fatal(err)
	}
	failSyncs.Store(true)
	if _, err := l.Append([][]byte{[]byte("lost")}); !errors.Is(err, statelog.ErrFailed) || !errors.Is(err, ErrFailed) {
		t.Fatalf("append under a failed journal sync: %v, want ErrFailed", err)
	}
	failSyncs.Store(false)
	if _, err := other.Append([][]byte{[]byte("after")}); !errors.Is(err, ErrFailed) {
		t.Fatalf("another log's append after a failed sync: %v, want the journal failed for good", err)
	}
	_ = l.Close()
	_ = other.Close()
	_ = j.Close()
	if _, recs := contents(t, fsys, 0); !slices.Equal(recs, []string{"0:ok"}) {
		t.Fatalf("the log holds %v, want only the acknowledged append", recs)
	}
}

// A log that recovery cannot open is held: the others recover, the held log refuses to open and
// the journal keeps its records; once the log is repaired (cut at its damage), the next recovery
// opens it as it is, appends what continues it, and logs the rest as lost.
func TestDamagedLogIsHeldUntilRepaired(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	nd := openNode(t, fsys, 2, Options{CheckpointInterval: time.Hour})
	appendN := func(id, from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := nd.logs[id].Append([][]byte{fmt.Appendf(nil, "r%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(0, 0, 10)
	appendN(1, 0, 10)
	if _, err := nd.j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	appendN(0, 10, 10)
	appendN(1, 10, 10)
	// Both logs durable up to 20, and the segment now written is the first one's file reused:
	// it holds more than its records.
	if _, err := nd.j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	appendN(0, 20, 5) // in the journal only
	appendN(1, 20, 5)
	crashed := fsys.CrashClone(faultfs.CrashOptions{})
	nd.close()

	// Damage log 0 below its checkpointed end.
	segs, err := crashed.ReadDir(logDir(0))
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, name := range segs {
		if filepath.Ext(name) == ".seg" {
			seg = filepath.Join(logDir(0), name)
			break
		}
	}
	data, err := crashed.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := crashed.WriteFile(seg, data); err != nil {
		t.Fatal(err)
	}

	logger := zaptest.NewLogger(t)
	lo := statelog.Options{FS: crashed, SegmentBytes: 4096}
	if held, err := Recover(logger, journalDir, logDirs(2), lo, crashed); err != nil || !slices.Equal(held, []int{0}) {
		t.Fatalf("Recover with a damaged log: held %v, %v; want log 0 held", held, err)
	}
	if _, recs := contents(t, crashed, 1); len(recs) != 25 {
		t.Fatalf("the healthy log holds %d records after recovery, want 25", len(recs))
	}
	j, err := Open(logger, journalDir, Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Log(0).Attach(nil); !errors.Is(err, ErrHeld) {
		t.Fatalf("a log opened in the held log's place: %v, want ErrHeld", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if frames, _, err := readFrames(logger, crashed, journalDir, 0, 0); err != nil || len(frames[0]) != 5 {
		t.Fatalf("the journal keeps %d batches of the held log (%v), want 5", len(frames[0]), err)
	}
	// Started again before the repair: the kept segments still read, the log is still held.
	if held, err := Recover(logger, journalDir, logDirs(2), lo, crashed); err != nil || !slices.Equal(held, []int{0}) {
		t.Fatalf("Recover again before the repair: held %v, %v; want log 0 held", held, err)
	}

	if _, err := statelog.Repair(logger, logDir(0), lo); err != nil {
		t.Fatal(err)
	}
	_, repaired := contents(t, crashed, 0)
	if held, err := Recover(logger, journalDir, logDirs(2), lo, crashed); err != nil || len(held) != 0 {
		t.Fatalf("Recover after the repair: held %v, %v", held, err)
	}
	_, recs := contents(t, crashed, 0)
	if len(recs) != len(repaired) || len(recs) >= 20 {
		t.Fatalf("the repaired log holds %d records after recovery, %d before; want the repair's, below 20, and the journal's lost", len(recs), len(repaired))
	}
	openNode(t, crashed, 2, Options{}).close() // opens again with the journal
}

// Rounds larger than the buffer the journal keeps between rounds: concurrent appends of large
// records survive a power cut intact.
func TestLargeRoundsSurviveAPowerCut(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	const logs, per = 3, 6
	nd := openNode(t, fsys, logs, Options{CheckpointInterval: time.Hour})
	big := func(id, i int) []byte {
		b := make([]byte, 3<<20)
		for k := range b {
			b[k] = byte(id*31 + i*7 + k)
		}
		return b
	}
	var wg sync.WaitGroup
	for id := range logs {
		wg.Go(func() {
			for i := range per {
				if _, err := nd.logs[id].Append([][]byte{big(id, i)}); err != nil {
					t.Errorf("append to log %d: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	crashed := fsys.CrashClone(faultfs.CrashOptions{})
	nd.close()
	openNode(t, crashed, logs, Options{}).close()
	for id := range logs {
		i := 0
		l, err := statelog.Load(zaptest.NewLogger(t), logDir(id), statelog.Options{FS: crashed, SegmentBytes: 4096}, func(off int64, r []byte) error {
			if want := big(id, int(off)); !slices.Equal(r, want) {
				return fmt.Errorf("record %d of log %d differs from what was appended", off, id)
			}
			i++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
		if i != per {
			t.Fatalf("log %d holds %d records after the cut, want %d", id, i, per)
		}
	}
}

// A log whose own sync failed cannot vouch for what it holds: the next checkpoint fails the
// journal instead of dropping the journal's copy, and a power cut then loses no acknowledged
// append.
func TestFailedLogKeepsTheJournalsCopy(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	inj, failSyncs := syncsFailingIn(fsys, logDir(0))
	nd := openNode(t, inj, 1, Options{CheckpointInterval: time.Hour})
	j, l := nd.j, nd.logs[0]
	acked := 0
	failSyncs.Store(true) // the log's own syncs fail from now on: the first roll fails it
	for i := 0; ; i++ {
		if _, err := l.Append([][]byte{fmt.Appendf(nil, "r%d", i)}); err != nil {
			break
		}
		acked++
	}
	if acked == 0 {
		t.Fatal("no append succeeded before the log's sync failed")
	}
	failSyncs.Store(false) // as on Linux, a later sync reports nothing of the pages it lost
	if _, err := j.checkpoint(); err == nil {
		t.Fatal("a checkpoint of a failed log succeeded")
	}
	crashed := fsys.CrashClone(faultfs.CrashOptions{})
	_ = l.Close()
	_ = j.Close()
	openNode(t, crashed, 1, Options{}).close()
	if _, recs := contents(t, crashed, 0); len(recs) < acked {
		t.Fatalf("the log holds %d records after the power cut, %d were acknowledged", len(recs), acked)
	}
}

// A last segment whose header never became durable (a crash while Open or a rotation made it)
// holds no records, and recovery goes on.
func TestHeaderlessLastSegment(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	nd := openNode(t, fsys, 1, Options{})
	if _, err := nd.logs[0].Append([][]byte{[]byte("r0")}); err != nil {
		t.Fatal(err)
	}
	nd.close()
	cp, _, err := readCheckpoint(fsys, journalDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile(filepath.Join(journalDir, segmentName(cp.Segment)), make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	openNode(t, fsys, 1, Options{}).close()
	if _, recs := contents(t, fsys, 0); !slices.Equal(recs, []string{"0:r0"}) {
		t.Fatalf("the log holds %v", recs)
	}
}

// A caller about to run a round first lets the writers that are about to queue do so: it yields
// as long as frames keep coming (at most gatherYields times), and one round then makes all of
// them durable.
func TestRoundGathersTheFramesOfWritersAboutToQueue(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	const logs = 4
	nd := openNode(t, fsys, logs, Options{CheckpointInterval: time.Hour})
	defer nd.close()
	j := nd.j

	// Each of the first logs-1 yields lets one more log append (it queues and waits for a round).
	var wg sync.WaitGroup
	yields := 0
	queue := func() {
		yields++
		if yields >= logs {
			return // nothing more comes: the caller stops yielding
		}
		l := nd.logs[yields]
		before := queued(j)
		wg.Go(func() {
			if _, err := l.Append([][]byte{[]byte("r")}); err != nil {
				t.Errorf("append: %v", err)
			}
		})
		for queued(j) == before {
			time.Sleep(time.Millisecond)
		}
	}
	j.mu.Lock()
	rounds := j.finished
	j.gatherLocked(queue)
	if got := len(j.pendingEnds); got != logs-1 {
		t.Errorf("the round gathered %d frames, want %d", got, logs-1)
	}
	if yields != logs {
		t.Errorf("the caller yielded %d times, want %d (until a yield brought no frame)", yields, logs)
	}
	j.runRoundLocked()
	if got := j.finished - rounds; got != 1 {
		t.Errorf("%d rounds ran, want 1", got)
	}
	j.mu.Unlock()
	wg.Wait()
	for id := 1; id < logs; id++ {
		if end := nd.logs[id].EndOffset(); end != 1 {
			t.Errorf("log %d ends at %d after its round, want 1", id, end)
		}
	}

	// Frames that never stop coming do not hold a round back for more than gatherYields yields.
	j.mu.Lock()
	yields = 0
	j.gatherLocked(func() {
		yields++
		j.mu.Lock()
		j.pendingEnds = append(j.pendingEnds, logEnd{id: -1})
		j.mu.Unlock()
	})
	j.pendingEnds = j.pendingEnds[:0]
	j.mu.Unlock()
	if yields != gatherYields {
		t.Errorf("with frames always coming the caller yielded %d times, want %d", yields, gatherYields)
	}
}

// queued returns how many frames wait for the next round of j.
func queued(j *Journal) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pendingEnds)
}

// waitFor polls cond every millisecond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// segmentState returns the segment written, its extent and the size of the prepared file made
// ready (0: none).
func segmentState(j *Journal) (segment uint64, extent, prepared int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.segment, j.extent, j.prepared
}

// A prepared file is made in the background, and a round that reaches its segment's extent
// moves the journal to it at once, long before the interval's checkpoint: the rounds write over
// blocks the file has instead of appending. The next prepared file is sized by the rate the
// closed segment was written at.
func TestRoundsMoveToThePreparedFileAtTheirExtent(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	opts := Options{CheckpointInterval: time.Hour, CheckpointBytes: 1 << 20, PreallocateBytes: 4096}
	nd := openNode(t, fsys, 2, opts)
	j := nd.j
	waitFor(t, "the first prepared file", func() bool { _, _, p := segmentState(j); return p > 0 })
	first, extent, prepared := segmentState(j)
	if extent != 4096 || prepared != 4096+segmentHeaderSize {
		t.Fatalf("first segment's extent %d, prepared file %d bytes; want 4096 and %d", extent, prepared, 4096+segmentHeaderSize)
	}
	// Appends from one goroutine follow each other's rounds at once on this in-memory file
	// system; a pause after each past the extent lets the checkpoint find the gap between two.
	payload := make([]byte, 100)
	var n int
	for {
		if _, err := nd.logs[n%2].Append([][]byte{payload}); err != nil {
			t.Fatal(err)
		}
		n++
		if s, _, _ := segmentState(j); s != first {
			break
		}
		if int64(n*len(payload)) > opts.CheckpointBytes/2 { // well before CheckpointBytes moves it
			t.Fatalf("still on segment %d after %d appends of 100 bytes, its extent %d bytes", first, n, extent)
		}
		if n*100 > int(extent) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	segment, extent, _ := segmentState(j)
	if segment != first+1 || extent != prepared {
		t.Fatalf("after the extent: segment %d with extent %d, want segment %d, the prepared file of %d bytes", segment, extent, first+1, prepared)
	}
	// The checkpoint that moved keeps the closed segment as the next prepared file, made as large
	// as an hour at its rate asks, within CheckpointBytes and a quarter.
	waitFor(t, "the next prepared file", func() bool { _, _, p := segmentState(j); return p > 0 })
	if _, _, p := segmentState(j); p != opts.CheckpointBytes*5/4+segmentHeaderSize {
		t.Fatalf("the next prepared file holds %d bytes, want %d", p, opts.CheckpointBytes*5/4+segmentHeaderSize)
	}
	crashed := fsys.CrashClone(faultfs.CrashOptions{})
	nd.close()
	openNode(t, crashed, 2, Options{}).close()
	for id := range 2 {
		if _, recs := contents(t, crashed, id); len(recs) != (n+1-id)/2 {
			t.Fatalf("log %d holds %d records after a power cut, want %d", id, len(recs), (n+1-id)/2)
		}
	}
}

// Without preallocation no file is prepared, and the rounds append until the interval's
// checkpoint.
func TestNoPreparedFileWithoutPreallocation(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	nd := openNode(t, fsys, 1, Options{CheckpointInterval: time.Hour, PreallocateBytes: -1})
	defer nd.close()
	first, _, _ := segmentState(nd.j)
	for range 200 {
		if _, err := nd.logs[0].Append([][]byte{make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if s, extent, p := segmentState(nd.j); s != first || p != 0 || extent != segmentHeaderSize {
		t.Fatalf("segment %d (extent %d, prepared %d) after 20 KB without preallocation, want segment %d, none prepared", s, extent, p, first)
	}
}

// A prepared file that cannot be written is removed, and the journal goes on appending.
func TestFailedPreparationLeavesTheJournalAppending(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	var refused atomic.Int64
	inj := faultfs.Wrap(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpWrite && filepath.Base(op.Path) == preparedName {
			refused.Add(1)
			return errors.New("injected ENOSPC")
		}
		return nil
	}))
	nd := openNode(t, inj, 1, Options{CheckpointInterval: time.Hour, PreallocateBytes: 4096})
	defer nd.close()
	waitFor(t, "the failed preparation's file to be removed", func() bool {
		if refused.Load() == 0 {
			return false
		}
		_, err := fsys.Open(filepath.Join(journalDir, preparedName))
		return errors.Is(err, fs.ErrNotExist)
	})
	first, _, _ := segmentState(nd.j)
	for i := range 100 {
		if _, err := nd.logs[0].Append([][]byte{make([]byte, 100)}); err != nil {
			t.Fatalf("append %d after the failed preparation: %v", i, err)
		}
	}
	if s, _, p := segmentState(nd.j); s != first || p != 0 {
		t.Fatalf("segment %d, prepared %d after a failed preparation; want segment %d, none prepared", s, p, first)
	}
}

func TestPreparedSize(t *testing.T) {
	o := Options{CheckpointInterval: 10 * time.Second, CheckpointBytes: 64 << 20, PreallocateBytes: 8 << 20}
	for _, c := range []struct {
		bytes int64
		took  time.Duration
		want  int64
	}{
		{0, 0, 8 << 20},                           // no rate yet: PreallocateBytes
		{40 << 20, 10 * time.Second, 50 << 20},    // a steady interval: a quarter more
		{8 << 20, 2 * time.Second, 50 << 20},      // filled early: the interval's worth at that rate
		{100, 10 * time.Second, minPreparedBytes}, // slow: the floor
		{64 << 20, time.Second, 80 << 20},         // faster than CheckpointBytes per interval: the cap
	} {
		if got := o.preparedSize(c.bytes, c.took); got != c.want+segmentHeaderSize {
			t.Errorf("preparedSize(%d, %v) = %d, want %d", c.bytes, c.took, got, c.want+segmentHeaderSize)
		}
	}
}

// Close does not wait for the prepared file's zeros: the preparation stops at the next MiB.
func TestCloseStopsThePreparation(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	var writes atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	inj := faultfs.Wrap(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpWrite && filepath.Base(op.Path) == preparedName && writes.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	}))
	nd := openNode(t, inj, 1, Options{CheckpointInterval: time.Hour, PreallocateBytes: 8 << 20})
	<-entered
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		nd.close()
	}()
	<-nd.j.stop // Close has asked the checkpoint loop to stop
	close(release)
	<-closed
	if n := writes.Load(); n != 1 {
		t.Fatalf("the preparation wrote %d MiB after Close, want it stopped after the one under way", n-1)
	}
}

// After a clean Close the next start writes over the blocks of the file Close's checkpoint had
// prepared, not over the small last segment cut to its records.
func TestRestartKeepsTheLargerFileForReuse(t *testing.T) {
	fsys := faultfs.NewCrashFS()
	opts := Options{CheckpointInterval: time.Hour, PreallocateBytes: 64 << 10}
	nd := openNode(t, fsys, 1, opts)
	waitFor(t, "the prepared file", func() bool { _, _, p := segmentState(nd.j); return p > 0 })
	if _, err := nd.logs[0].Append([][]byte{[]byte("r")}); err != nil {
		t.Fatal(err)
	}
	nd.close()
	again := openNode(t, fsys, 1, opts)
	defer again.close()
	if _, extent, _ := segmentState(again.j); extent < 64<<10 {
		t.Fatalf("the segment after a restart has an extent of %d bytes, want the %d of the file prepared before", extent, 64<<10)
	}
}
