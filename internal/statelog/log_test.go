package statelog

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	"go.uber.org/zap/zaptest"
)

func TestAppendReplayRoundTrip(t *testing.T) {
	tests := []struct {
		name         string
		opts         Options
		batches      int
		batchSize    int // records per batch; 0 → random in [1, 40]
		minRec       int
		maxRec       int
		wantSegments int  // 0 → not checked
		mem          bool // on the in-memory filesystem rather than the disk
	}{
		{name: "one record", batches: 1, batchSize: 1, minRec: 150, maxRec: 150, wantSegments: 1},
		{name: "many batches one segment", batches: 50, minRec: 0, maxRec: 300, wantSegments: 1, mem: true},
		{name: "empty records", batches: 5, batchSize: 10, minRec: 0, maxRec: 0, wantSegments: 1},
		{name: "roll every batch", opts: Options{SegmentBytes: 1}, batches: 20, minRec: 1, maxRec: 100, wantSegments: 20},
		{name: "small segments", opts: Options{SegmentBytes: 4096}, batches: 100, minRec: 10, maxRec: 200, mem: true},
		{name: "tiny read buffer, records larger than it", opts: Options{ReadBufferBytes: 64, SegmentBytes: 8192},
			batches: 30, batchSize: 3, minRec: 100, maxRec: 1000, mem: true},
		{name: "batch larger than a segment", opts: Options{SegmentBytes: 512}, batches: 3, batchSize: 20, minRec: 100, maxRec: 100, wantSegments: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			if tc.mem {
				tc.opts.FS = faultfs.NewCrashFS()
			}
			rng := rand.New(rand.NewPCG(1, 2))
			l := mustOpen(t, dir, tc.opts)
			var model [][]byte
			for range tc.batches {
				n := tc.batchSize
				if n == 0 {
					n = 1 + rng.IntN(40)
				}
				batch := makeBatch(rng, n, tc.minRec, tc.maxRec)
				if first := mustAppend(t, l, batch); first != int64(len(model)) {
					t.Fatalf("Append returned first offset %d, want %d", first, len(model))
				}
				model = append(model, batch...)
			}
			if got := l.EndOffset(); got != int64(len(model)) {
				t.Fatalf("EndOffset() = %d, want %d", got, len(model))
			}
			checkRecords(t, readAll(t, l, 0), want(model, 0))
			if tc.wantSegments > 0 {
				if got := len(segmentFiles(t, l.fs, dir)); got != tc.wantSegments {
					t.Fatalf("%d segment files, want %d", got, tc.wantSegments)
				}
			}
			if got, want := l.Size(), segmentBytes(t, l.fs, dir); got != want {
				t.Fatalf("Size() = %d, segment files hold %d bytes", got, want)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			l2 := mustOpen(t, dir, tc.opts)
			if l2.StartOffset() != 0 || l2.EndOffset() != int64(len(model)) {
				t.Fatalf("reopened bounds [%d, %d), want [0, %d)", l2.StartOffset(), l2.EndOffset(), len(model))
			}
			checkRecords(t, readAll(t, l2, 0), want(model, 0))
			// Appends continue after reopening.
			batch := makeBatch(rng, 3, 1, 50)
			if first := mustAppend(t, l2, batch); first != int64(len(model)) {
				t.Fatalf("Append after reopen returned %d, want %d", first, len(model))
			}
			model = append(model, batch...)
			checkRecords(t, readAll(t, l2, 0), want(model, 0))
		})
	}
}

// segmentBytes returns the bytes of the segment files in dir.
func segmentBytes(t *testing.T, fsys FS, dir string) int64 {
	t.Helper()
	var n int64
	for _, name := range segmentFiles(t, fsys, dir) {
		size, err := fileSize(fsys, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n += size
	}
	return n
}

func TestSegmentRolling(t *testing.T) {
	dir := t.TempDir()
	batch := func(i int) [][]byte { return fixedBatch(uint64(i), 1, 100) }
	frame := frameLen(batch(0)) // 132 bytes
	// Three frames fit exactly; the fourth rolls.
	l := mustOpen(t, dir, Options{SegmentBytes: segmentHeaderSize + 3*frame})
	for i := range 10 {
		mustAppend(t, l, batch(i))
	}
	want := []string{segmentName(0, 1), segmentName(3, 2), segmentName(6, 3), segmentName(9, 4)}
	got := segmentFiles(t, l.fs, dir)
	if len(got) != len(want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("segment %d is %s, want %s", i, got[i], want[i])
		}
		fi, err := os.Stat(filepath.Join(dir, got[i]))
		if err != nil {
			t.Fatal(err)
		}
		frames := int64(3)
		if i == 3 {
			frames = 1
		}
		if fi.Size() != segmentHeaderSize+frames*frame {
			t.Fatalf("segment %s has %d bytes, want %d", got[i], fi.Size(), segmentHeaderSize+frames*frame)
		}
	}
	// Ids keep increasing across reopen even when every older segment is gone.
	if err := l.SetStartOffset(10); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	l = mustOpen(t, dir, Options{SegmentBytes: segmentHeaderSize + 3*frame})
	for i := range 3 {
		mustAppend(t, l, batch(10+i))
	}
	got = segmentFiles(t, l.fs, dir)
	if last := got[len(got)-1]; last != segmentName(12, 5) {
		t.Fatalf("segments after reopen %v, want the last to be %s", got, segmentName(12, 5))
	}
}

func TestReplayFromEveryOffset(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	opts := Options{SegmentBytes: 2048, ReadBufferBytes: 256}
	l := mustOpen(t, dir, opts)
	var model [][]byte
	for range 40 {
		b := makeBatch(rng, 1+rng.IntN(8), 0, 120)
		mustAppend(t, l, b)
		model = append(model, b...)
	}
	check := func(l *Log) {
		for from := l.StartOffset(); from <= l.EndOffset(); from++ {
			checkRecords(t, readAll(t, l, from), want(model, from))
		}
	}
	check(l)
	if err := l.SetStartOffset(int64(len(model)) / 2); err != nil {
		t.Fatal(err)
	}
	check(l)
	_ = l.Close()
	check(mustOpen(t, dir, opts))
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 300})
	for i := range 10 {
		mustAppend(t, l, fixedBatch(uint64(i), 2, 50))
	}
	if err := l.SetStartOffset(5); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	tests := []struct {
		name    string
		from    int64
		fn      func(int64, []byte) error
		wantErr error
		wantN   int
	}{
		{name: "below start", from: 4, wantErr: ErrOutOfRange},
		{name: "beyond end", from: 21, wantErr: ErrOutOfRange},
		{name: "at end", from: 20, wantN: 0},
		{name: "callback error returned as is", from: 5, wantErr: stop, wantN: 3,
			fn: func(off int64, _ []byte) error {
				if off == 7 {
					return stop
				}
				return nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := l.Replay(tc.from, func(off int64, r []byte) error {
				n++
				if tc.fn != nil {
					return tc.fn(off, r)
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Replay(%d) = %v, want %v", tc.from, err, tc.wantErr)
			}
			if tc.wantErr == stop && err != stop {
				t.Fatalf("callback error was wrapped: %v", err)
			}
			if n != tc.wantN {
				t.Fatalf("callback ran %d times, want %d", n, tc.wantN)
			}
		})
	}
	// A record must not be extendable into the next one.
	err := l.Replay(5, func(off int64, r []byte) error {
		if cap(r) != len(r) {
			t.Fatalf("record %d has spare capacity %d", off, cap(r)-len(r))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAppendErrors(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{MaxRecordBytes: 100})
	mustAppend(t, l, fixedBatch(1, 2, 100))

	if first, err := l.Append(nil); err != nil || first != 2 {
		t.Fatalf("Append(nil) = %d, %v; want 2, nil", first, err)
	}
	size := l.Size()
	if _, err := l.Append([][]byte{make([]byte, 10), make([]byte, 101)}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Append(oversized record) = %v, want ErrRecordTooLarge", err)
	}
	if l.Size() != size || l.EndOffset() != 2 {
		t.Fatalf("rejected append changed the log: size %d→%d, end %d", size, l.Size(), l.EndOffset())
	}
	// Not sticky.
	if first := mustAppend(t, l, fixedBatch(2, 1, 10)); first != 2 {
		t.Fatalf("Append after rejection returned %d, want 2", first)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	if _, err := l.Append(fixedBatch(3, 1, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := l.Replay(0, func(int64, []byte) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Replay after Close = %v, want ErrClosed", err)
	}
	if err := l.SetStartOffset(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetStartOffset after Close = %v, want ErrClosed", err)
	}
	if l.EndOffset() != 3 {
		t.Fatalf("EndOffset after Close = %d, want 3", l.EndOffset())
	}
}

func TestStickyFailure(t *testing.T) {
	tests := []struct {
		name string
		kind faultfs.OpKind
	}{
		{name: "write", kind: faultfs.OpWrite},
		{name: "sync", kind: faultfs.OpSync},
		{name: "roll create", kind: faultfs.OpCreate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := faultfs.NewCrashFS()
			ffs := faultfs.Wrap(mem, nil)
			opts := Options{FS: ffs, SegmentBytes: 200}
			l := mustOpen(t, "/log", opts)
			mustAppend(t, l, fixedBatch(1, 1, 100))
			ffs.SetInjector(faultfs.Match(faultfs.OnKinds(tc.kind), errEIO))
			_, err := l.Append(fixedBatch(2, 1, 100)) // rolls: the segment is full
			if !errors.Is(err, ErrFailed) || !errors.Is(err, errEIO) {
				t.Fatalf("Append with failing %s = %v, want ErrFailed wrapping EIO", tc.kind, err)
			}
			ffs.SetInjector(nil)
			// Sticky: even with the fault gone, the log refuses until reopened.
			if _, err := l.Append(fixedBatch(3, 1, 10)); !errors.Is(err, ErrFailed) {
				t.Fatalf("Append after failure = %v, want ErrFailed", err)
			}
			if err := l.SetStartOffset(1); !errors.Is(err, ErrFailed) {
				t.Fatalf("SetStartOffset after failure = %v, want ErrFailed", err)
			}
			if err := l.Replay(0, func(int64, []byte) error { return nil }); !errors.Is(err, ErrFailed) {
				t.Fatalf("Replay after failure = %v, want ErrFailed", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, "/log", opts)
			if l.EndOffset() < 1 {
				t.Fatalf("acknowledged record lost: EndOffset %d", l.EndOffset())
			}
			mustAppend(t, l, fixedBatch(4, 1, 10))
		})
	}
}

func TestOpenLocksDirectory(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	_, err := Open(zaptest.NewLogger(t), dir, Options{})
	if !errors.Is(err, syscall.EWOULDBLOCK) || !strings.Contains(err.Error(), "is in use: another process holds its lock") {
		t.Fatalf("second Open of a locked directory: %v, want it refused as in use", err)
	}
	if _, err := Repair(zaptest.NewLogger(t), dir, Options{}); err == nil {
		t.Fatal("Repair of a locked directory succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, dir, Options{})
}

// TestLockDirFailureNotInUse: a lock that fails for another reason than a holder (here
// permission denied) is not reported as the directory being in use.
func TestLockDirFailureNotInUse(t *testing.T) {
	fsys := faultfs.Wrap(vfs.OS(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpLock {
			return syscall.EACCES
		}
		return nil
	}))
	_, err := LockDir(fsys, t.TempDir())
	if !errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "in use") {
		t.Fatalf("LockDir with the lock file denied: %v, want the permission error, not \"in use\"", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{name: "negative segment bytes", opts: Options{SegmentBytes: -1}},
		{name: "negative max record bytes", opts: Options{MaxRecordBytes: -1}},
		{name: "max record bytes beyond batch bound", opts: Options{MaxRecordBytes: MaxBatchBytes}},
		{name: "negative read buffer", opts: Options{ReadBufferBytes: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Open(zaptest.NewLogger(t), t.TempDir(), tc.opts); err == nil {
				t.Fatal("Open accepted invalid options")
			}
		})
	}
}
