package statelog

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// outcome is what opening a log and reading it back produced.
type outcome struct {
	err        error
	recs       []rec // the records handed over (Load) or replayed (Open+Replay)
	start, end int64
	torn       float64 // torn-tail truncations counted
}

// viaOpenReplay is the reference: Open, then Replay from the log-start offset.
func viaOpenReplay(t testing.TB, dir string, opts Options) outcome {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Metrics, opts.Name = NewMetrics(reg), "0"
	l, err := Open(zaptest.NewLogger(t), dir, opts)
	if err != nil {
		return outcome{err: err}
	}
	defer l.Close()
	o := outcome{start: l.StartOffset(), end: l.EndOffset()}
	o.err = l.Replay(l.StartOffset(), collect(&o.recs))
	o.torn = metricValue(t, reg, "sharecoord_state_log_torn_tail_truncations_total", "0")
	return o
}

// viaLoad opens the log with Load, collecting what it hands over.
func viaLoad(t testing.TB, dir string, opts Options) outcome {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Metrics, opts.Name = NewMetrics(reg), "0"
	var o outcome
	l, err := Load(zaptest.NewLogger(t), dir, opts, collect(&o.recs))
	if err != nil {
		o.err = err
		return o
	}
	defer l.Close()
	o.start, o.end = l.StartOffset(), l.EndOffset()
	o.torn = metricValue(t, reg, "sharecoord_state_log_torn_tail_truncations_total", "0")
	return o
}

// sameOutcome fails the test unless Load's outcome is the reference's: the same error (a
// *CorruptionError naming the same file, by name, and byte offset) or, on success, the same
// bounds, the same records and the same torn-tail count.
func sameOutcome(t testing.TB, ref, got outcome) {
	t.Helper()
	if (ref.err == nil) != (got.err == nil) {
		t.Fatalf("Open+Replay error %v, Load error %v", ref.err, got.err)
	}
	if ref.err != nil {
		var rce, gce *CorruptionError
		if errors.As(ref.err, &rce) != errors.As(got.err, &gce) {
			t.Fatalf("Open+Replay error %v, Load error %v: not the same kind", ref.err, got.err)
		}
		if rce != nil && (filepath.Base(rce.Segment) != filepath.Base(gce.Segment) || rce.Offset != gce.Offset || rce.Reason != gce.Reason) {
			t.Fatalf("Open found corruption in %s at byte %d (%s), Load in %s at byte %d (%s)",
				filepath.Base(rce.Segment), rce.Offset, rce.Reason, filepath.Base(gce.Segment), gce.Offset, gce.Reason)
		}
		return
	}
	if ref.start != got.start || ref.end != got.end {
		t.Fatalf("Open+Replay bounds [%d, %d), Load bounds [%d, %d)", ref.start, ref.end, got.start, got.end)
	}
	if ref.torn != got.torn {
		t.Fatalf("torn-tail truncations: Open %v, Load %v", ref.torn, got.torn)
	}
	compareRecs(t, "Load (against Open+Replay)", got.recs, ref.recs)
}

// genuine fails the test unless every record handed over is the model's record at its offset,
// in offset order from from: a failed load may hand over records, but only valid ones.
func genuine(t testing.TB, got []rec, model [][]byte, from int64) {
	t.Helper()
	for i, r := range got {
		if r.off != from+int64(i) || r.off >= int64(len(model)) || !bytes.Equal(r.data, model[r.off]) {
			t.Fatalf("record %d handed over at offset %d is not the record written there", i, r.off)
		}
	}
}

// Every row of the corruption table: Load fails or succeeds exactly as Open does, names the
// same file and byte offset, leaves a corrupt directory untouched, and on success hands over
// what Open+Replay yields and leaves the directory as Open does.
func TestLoadMatchesOpenOnCorruptionTable(t *testing.T) {
	pristine, pristineSegs, model := buildCorruptionLog(t)
	for _, tc := range corruptionCases() {
		t.Run(tc.name, func(t *testing.T) {
			ref, _ := damagedCopy(t, pristine, pristineSegs, tc)
			dir := copyDir(t, ref)
			before := dirContent(t, dir)

			want := viaOpenReplay(t, ref, ctOptions())
			got := viaLoad(t, dir, ctOptions())
			sameOutcome(t, want, got)
			if tc.torn != (got.err == nil) {
				t.Fatalf("Load error %v; the table expects torn=%v", got.err, tc.torn)
			}
			if got.err != nil {
				if after := dirContent(t, dir); !maps.Equal(before, after) {
					t.Fatal("Load changed a corrupt log")
				}
				genuine(t, got.recs, model, 0)
				// The directory is unlocked again.
				if err := Scan(zaptest.NewLogger(t), dir, ctOptions(), func(int64, []byte) error { return nil }); err == nil {
					t.Fatal("Scan of the corrupt log succeeded")
				}
				return
			}
			if !maps.Equal(dirContent(t, ref), dirContent(t, dir)) {
				t.Fatal("Load left the directory different from Open")
			}
		})
	}
}

// memSnapshot returns the content of every file of dir in fsys.
func memSnapshot(t testing.TB, fsys *faultfs.CrashFS, dir string) map[string]string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, n := range names {
		b, err := fsys.ReadFile(path.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// loadBoth runs the reference and Load on two copies of fsys's log in dir, compares them, and
// on success checks that both leave the same files.
func loadBoth(t testing.TB, fsys *faultfs.CrashFS, dir string, opts Options) outcome {
	t.Helper()
	refFS, loadFS := fsys.CrashClone(faultfs.CrashOptions{}), fsys.CrashClone(faultfs.CrashOptions{})
	before := memSnapshot(t, loadFS, dir)
	opts.FS = refFS
	want := viaOpenReplay(t, dir, opts)
	opts.FS = loadFS
	got := viaLoad(t, dir, opts)
	sameOutcome(t, want, got)
	scanAgrees(t, fsys.CrashClone(faultfs.CrashOptions{}), dir, opts, got)
	after := memSnapshot(t, loadFS, dir)
	delete(before, lockFileName)
	delete(after, lockFileName)
	if got.err != nil {
		if errors.As(got.err, new(*CorruptionError)) && !maps.Equal(before, after) {
			t.Fatal("Load changed a corrupt log")
		}
		return got
	}
	refFiles := memSnapshot(t, refFS, dir)
	delete(refFiles, lockFileName)
	if !maps.Equal(refFiles, after) {
		t.Fatal("Load left the directory different from Open")
	}
	return got
}

// scanAgrees checks Scan (dump-log) against Load's outcome on a copy of the same log: the same
// records, up to the same corruption if there is one, and nothing changed on disk.
func scanAgrees(t testing.TB, fsys *faultfs.CrashFS, dir string, opts Options, load outcome) {
	t.Helper()
	before := memSnapshot(t, fsys, dir)
	opts.FS = fsys
	var scanned []rec
	err := Scan(zaptest.NewLogger(t), dir, opts, collect(&scanned))
	if after := memSnapshot(t, fsys, dir); !maps.Equal(before, after) {
		t.Fatal("Scan changed the log")
	}
	var lce, sce *CorruptionError
	switch {
	case !holdsLog(slices.Collect(maps.Keys(before))):
		// Every log file was removed: Load starts a new log there, Scan refuses.
		if !errors.Is(err, ErrNoLog) || len(scanned) > 0 || load.err != nil || len(load.recs) > 0 {
			t.Fatalf("directory without a log: Scan returned %v and %d records, Load %v and %d records; want ErrNoLog from Scan and an empty new log from Load",
				err, len(scanned), load.err, len(load.recs))
		}
		return
	case errors.As(load.err, &lce):
		if !errors.As(err, &sce) || filepath.Base(sce.Segment) != filepath.Base(lce.Segment) || sce.Offset != lce.Offset {
			t.Fatalf("Load found corruption %v, Scan returned %v", lce, err)
		}
	case load.err != nil:
		return // an I/O failure of Load's own, such as a failed truncation
	case err != nil:
		t.Fatalf("Load succeeded, Scan failed: %v", err)
	}
	compareRecs(t, "Scan (against Load)", scanned, load.recs)
}

// The torn-tail table: the last batch cut after every number of its bytes.
func TestLoadMatchesOpenOnTornTails(t *testing.T) {
	last := fixedBatch(99, 5, 37)
	for _, segBytes := range []int64{1 << 20, segmentHeaderSize + 2*frameLen(fixedBatch(0, 3, 20))} {
		t.Run(fmt.Sprintf("segment_bytes=%d", segBytes), func(t *testing.T) {
			tl := buildTornTailLog(t, segBytes, 4, last)
			full := tl.files[tl.newest]
			for cut := int64(len(full)) - frameLen(last); cut <= int64(len(full)); cut++ {
				fsys := tl.mem.CrashClone(faultfs.CrashOptions{})
				if err := fsys.WriteFile(path.Join("/log", tl.newest), full[:cut]); err != nil {
					t.Fatal(err)
				}
				got := loadBoth(t, fsys, "/log", Options{SegmentBytes: segBytes})
				if got.err != nil {
					t.Fatalf("cut at byte %d: %v", cut, got.err)
				}
				wantRecs := len(tl.model)
				if cut == int64(len(full)) {
					wantRecs += len(last)
				}
				if len(got.recs) != wantRecs {
					t.Fatalf("cut at byte %d: %d records, want %d", cut, len(got.recs), wantRecs)
				}
			}
		})
	}
}

// Recovery cases beyond damage: an interrupted roll, segments left below the log-start offset
// by an interrupted SetStartOffset, a start offset inside a frame, a stale temporary file.
func TestLoadMatchesOpenOnRecovery(t *testing.T) {
	build := func(t *testing.T) (*faultfs.CrashFS, [][]byte) {
		mem := faultfs.NewCrashFS()
		l := mustOpen(t, "/log", Options{FS: mem, SegmentBytes: 600})
		var model [][]byte
		for i := range 12 {
			b := fixedBatch(uint64(i), 3, 40)
			mustAppend(t, l, b)
			model = append(model, b...)
		}
		kill(t, l) // the cases model what an interrupted process leaves
		return mem, model
	}
	tests := []struct {
		name      string
		edit      func(t *testing.T, mem *faultfs.CrashFS)
		wantStart int64
	}{
		{name: "clean"},
		{name: "interrupted roll", edit: func(t *testing.T, mem *faultfs.CrashFS) {
			var hdr [segmentHeaderSize]byte
			segmentHeader{id: 99, base: 36}.encode(hdr[:])
			if err := mem.WriteFile(path.Join("/log", segmentName(36, 99)), hdr[:segmentHeaderSize-3]); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "start offset inside a frame, segments below it", wantStart: 20, edit: func(t *testing.T, mem *faultfs.CrashFS) {
			if err := writeStartFile(mem, "/log", 20); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "start offset at the end", wantStart: 36, edit: func(t *testing.T, mem *faultfs.CrashFS) {
			if err := writeStartFile(mem, "/log", 36); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "stale temporary start file", edit: func(t *testing.T, mem *faultfs.CrashFS) {
			if err := mem.WriteFile(path.Join("/log", startTmpName), []byte("half")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem, model := build(t)
			if tc.edit != nil {
				tc.edit(t, mem)
			}
			for _, buf := range []int{64, 1 << 20} {
				got := loadBoth(t, mem, "/log", Options{SegmentBytes: 600, ReadBufferBytes: buf})
				if got.err != nil {
					t.Fatal(got.err)
				}
				if got.start != tc.wantStart {
					t.Fatalf("start offset %d, want %d", got.start, tc.wantStart)
				}
				compareRecs(t, "Load", got.recs, want(model, tc.wantStart))
			}
		})
	}
}

// A callback error stops the load, comes back as is, and leaves no log open: the directory can
// be opened again.
func TestLoadCallbackError(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 300})
	for i := range 10 {
		mustAppend(t, l, fixedBatch(uint64(i), 2, 30))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop here")
	var seen int
	_, err := Load(zaptest.NewLogger(t), dir, Options{SegmentBytes: 300}, func(off int64, _ []byte) error {
		seen++
		if off == 7 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Load = %v, want the callback's error as is", err)
	}
	if seen != 8 {
		t.Fatalf("callback called %d times, want 8", seen)
	}
	l = mustOpen(t, dir, Options{SegmentBytes: 300})
	if l.EndOffset() != 20 {
		t.Fatalf("EndOffset after the aborted load = %d, want 20", l.EndOffset())
	}
	if _, err := Load(zaptest.NewLogger(t), t.TempDir(), Options{}, nil); err == nil {
		t.Fatal("Load without a callback succeeded")
	}
}

// randomLog builds, from seed, a log with random batches, segment size and log-start offset on
// an in-memory filesystem, then damages it in one of several ways (or not at all). It returns
// the filesystem, the options and the records written.
func randomLog(t testing.TB, seed uint64) (*faultfs.CrashFS, Options, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	mem := faultfs.NewCrashFS()
	opts := Options{FS: mem, SegmentBytes: int64(64 + rng.IntN(3000)), ReadBufferBytes: []int{64, 333, 4096, 1 << 20}[rng.IntN(4)],
		MaxRecordBytes: 1 << 12}
	l, err := Open(zap.NewNop(), "/log", opts)
	if err != nil {
		t.Fatal(err)
	}
	var model [][]byte
	for range rng.IntN(40) {
		b := makeBatch(rng, 1+rng.IntN(6), 0, 200)
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		model = append(model, b...)
		if rng.IntN(8) == 0 {
			if err := l.SetStartOffset(rng.Int64N(int64(len(model)) + 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Closed, the damage is judged against the clean-end file; killed, as after a crash.
	if rng.IntN(2) == 0 {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		kill(t, l)
	}
	segs := segmentFiles(t, mem, "/log")
	target := path.Join("/log", segs[rng.IntN(len(segs))])
	content, err := mem.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	switch rng.IntN(7) {
	case 0: // untouched
	case 1: // one bit flipped anywhere
		if len(content) > 0 {
			content[rng.IntN(len(content))] ^= byte(1 << rng.IntN(8))
		}
	case 2: // cut short
		content = content[:rng.IntN(len(content)+1)]
	case 3: // garbage appended
		content = append(content, makeBatch(rng, 1, 1, 100)[0]...)
	case 4: // a segment removed
		if err := mem.Remove(target); err != nil {
			t.Fatal(err)
		}
		if err := mem.SyncDir("/log"); err != nil {
			t.Fatal(err)
		}
		return mem, opts, model
	case 5: // a stretch zeroed
		if len(content) > 0 {
			at := rng.IntN(len(content))
			clear(content[at:min(len(content), at+1+rng.IntN(64))])
		}
	case 6: // the log-start offset moved without deleting segments (interrupted SetStartOffset)
		if err := writeStartFile(mem, "/log", rng.Int64N(int64(len(model))+1)); err != nil {
			t.Fatal(err)
		}
		return mem, opts, model
	}
	if err := mem.WriteFile(target, content); err != nil {
		t.Fatal(err)
	}
	return mem, opts, model
}

// checkLoadAgainstReference compares Load with Open+Replay on the random log of seed. Whatever
// Load hands over, even when it fails, is genuine.
func checkLoadAgainstReference(t testing.TB, seed uint64) {
	mem, opts, model := randomLog(t, seed)
	got := loadBoth(t, mem, "/log", Options{SegmentBytes: opts.SegmentBytes, ReadBufferBytes: opts.ReadBufferBytes, MaxRecordBytes: opts.MaxRecordBytes})
	if len(got.recs) > 0 {
		genuine(t, got.recs, model, got.recs[0].off)
	}
}

// The property over random logs, a few hundred of them in every test run.
func TestLoadMatchesOpenReplayRandom(t *testing.T) {
	for seed := range uint64(400) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { checkLoadAgainstReference(t, seed) })
	}
}

// FuzzLoadMatchesOpenReplay explores the same property over fuzzer-chosen seeds.
func FuzzLoadMatchesOpenReplay(f *testing.F) {
	for _, seed := range []uint64{0, 1, 7, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkLoadAgainstReference(t, seed) })
}
