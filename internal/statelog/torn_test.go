package statelog

import (
	"fmt"
	"path"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// tornTailLog is a log in /log on a CrashFS whose last batch a test cuts short.
type tornTailLog struct {
	mem    *faultfs.CrashFS
	model  [][]byte          // the records before the last batch
	files  map[string][]byte // content of each segment file, by name
	newest string            // name of the newest segment, which ends with the last batch
}

// buildTornTailLog appends batches batches of 3 records of 20 bytes, then last, to a new log
// with segments of segBytes, and ends it as a killed process would (no clean-end file).
func buildTornTailLog(t *testing.T, segBytes int64, batches int, last [][]byte) tornTailLog {
	t.Helper()
	tl := tornTailLog{mem: faultfs.NewCrashFS(), files: map[string][]byte{}}
	l := mustOpen(t, "/log", Options{FS: tl.mem, SegmentBytes: segBytes})
	for i := range batches {
		b := fixedBatch(uint64(i), 3, 20)
		mustAppend(t, l, b)
		tl.model = append(tl.model, b...)
	}
	mustAppend(t, l, last)
	kill(t, l)
	segs := segmentFiles(t, tl.mem, "/log")
	for _, s := range segs {
		b, err := tl.mem.ReadFile(path.Join("/log", s))
		if err != nil {
			t.Fatal(err)
		}
		tl.files[s] = b
	}
	tl.newest = segs[len(segs)-1]
	return tl
}

// TestTornTailEveryLength cuts the last batch after every possible number of its bytes:
// reopening must keep every earlier batch, drop the partial one, and accept appends.
func TestTornTailEveryLength(t *testing.T) {
	last := fixedBatch(99, 5, 37) // 28 + 5*(4+37) = 233 bytes
	tests := []struct {
		name     string
		segBytes int64
		batches  int // before the last one
		newSeg   bool
	}{
		{name: "last batch mid-segment", segBytes: 1 << 20, batches: 4},
		{name: "last batch opens a new segment", segBytes: segmentHeaderSize + 2*frameLen(fixedBatch(0, 3, 20)), batches: 4, newSeg: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Build the intact log once.
			tl := buildTornTailLog(t, tc.segBytes, tc.batches, last)
			model, full, newest := tl.model, tl.files[tl.newest], path.Join("/log", tl.newest)
			frameStart := int64(len(full)) - frameLen(last)
			if tc.newSeg && frameStart != segmentHeaderSize {
				t.Fatalf("last batch starts at byte %d of the newest segment, want it first", frameStart)
			}

			for cut := frameStart; cut < int64(len(full)); cut++ {
				t.Run(fmt.Sprintf("bytes=%d", cut-frameStart), func(t *testing.T) {
					fsys := faultfs.NewCrashFS()
					if err := fsys.MkdirAll("/log"); err != nil {
						t.Fatal(err)
					}
					for n, b := range tl.files {
						if n == tl.newest {
							b = b[:cut]
						}
						if err := fsys.WriteFile(path.Join("/log", n), b); err != nil {
							t.Fatal(err)
						}
					}
					reg := prometheus.NewRegistry()
					opts := Options{FS: fsys, SegmentBytes: tc.segBytes, Metrics: NewMetrics(reg), Name: "0"}
					l, err := Open(zaptest.NewLogger(t), "/log", opts)
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					defer l.Close()
					if l.EndOffset() != int64(len(model)) {
						t.Fatalf("EndOffset() = %d, want %d", l.EndOffset(), len(model))
					}
					checkRecords(t, readAll(t, l, 0), want(model, 0))
					wantTorn := 0.0
					if cut > frameStart {
						wantTorn = 1
					}
					if got := metricValue(t, reg, "sharecoord_state_log_torn_tail_truncations_total", "0"); got != wantTorn {
						t.Fatalf("torn-tail truncations = %v, want %v", got, wantTorn)
					}
					if b, _ := fsys.ReadFile(newest); int64(len(b)) != frameStart {
						t.Fatalf("newest segment has %d bytes after recovery, want %d", len(b), frameStart)
					}
					more := fixedBatch(1000, 2, 10)
					if first := mustAppend(t, l, more); first != int64(len(model)) {
						t.Fatalf("Append after recovery returned %d, want %d", first, len(model))
					}
					checkRecords(t, readAll(t, l, 0), want(append(model[:len(model):len(model)], more...), 0))
				})
			}
		})
	}
}

// TestInterruptedRoll covers a crash while creating a segment: the new file exists with an
// incomplete or unsynced header and no frame. Open deletes it and continues the previous one.
func TestInterruptedRoll(t *testing.T) {
	for cut := 0; cut <= segmentHeaderSize; cut++ {
		t.Run(fmt.Sprintf("header_bytes=%d", cut), func(t *testing.T) {
			mem := faultfs.NewCrashFS()
			opts := Options{FS: mem}
			l := mustOpen(t, "/log", opts)
			batch := fixedBatch(1, 4, 30)
			mustAppend(t, l, batch)
			kill(t, l) // and the next process is killed while it rolls
			var hdr [segmentHeaderSize]byte
			segmentHeader{id: 2, base: 4}.encode(hdr[:])
			if cut == segmentHeaderSize {
				hdr[29] ^= 0xff // complete but never synced: checksum mismatch
			}
			remnant := path.Join("/log", segmentName(4, 2))
			if err := mem.WriteFile(remnant, hdr[:min(cut, segmentHeaderSize)]); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, "/log", opts)
			if _, err := mem.ReadFile(remnant); err == nil {
				t.Fatal("remnant of the interrupted roll is still there")
			}
			checkRecords(t, readAll(t, l, 0), want(batch, 0))
			more := fixedBatch(2, 1, 5)
			mustAppend(t, l, more)
			if got := segmentFiles(t, mem, "/log"); len(got) != 1 {
				t.Fatalf("segments %v, want one", got)
			}
		})
	}
}

// A record may hold bytes that form an intact frame (a client chooses them). When the append
// carrying it is torn, those bytes must not count as a frame a writer completed after the damage:
// the frame's intact header says where it ends, and the search for later frames starts there.
// Torn both where the file ends inside the frame and where its payload is whole in length but
// holds other bytes than were written (pages written out of order). When the torn frame's own
// header is what was lost, the frame-like bytes do not continue the log's offsets, and do not
// count either.
func TestTornTailWithFrameInsideItsRecord(t *testing.T) {
	var fake [frameHeaderSize]byte
	frameHeader{count: 0, length: 0, base: 0, payloadCRC: crc(nil)}.encode(fake[:])
	rec := make([]byte, 4096)
	copy(rec[100:], fake[:])
	tl := buildTornTailLog(t, 1<<20, 3, [][]byte{rec})
	full := tl.files[tl.newest]
	frameStart := int64(len(full)) - frameLen([][]byte{rec})
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"cut after the frame-like bytes", func(b []byte) []byte { return b[:frameStart+frameHeaderSize+recordPrefixSize+200] }},
		{"stale bytes after the frame-like bytes", func(b []byte) []byte {
			for i := frameStart + frameHeaderSize + recordPrefixSize + 200; i < int64(len(b)); i++ {
				b[i] = 0xaa
			}
			return b
		}},
		{"header lost, cut after the frame-like bytes", func(b []byte) []byte {
			clear(b[frameStart : frameStart+frameHeaderSize])
			return b[:frameStart+frameHeaderSize+recordPrefixSize+200]
		}},
		{"header lost, stale bytes after the frame-like bytes", func(b []byte) []byte {
			clear(b[frameStart : frameStart+frameHeaderSize])
			for i := frameStart + frameHeaderSize + recordPrefixSize + 200; i < int64(len(b)); i++ {
				b[i] = 0xaa
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := faultfs.NewCrashFS()
			if err := fsys.MkdirAll("/log"); err != nil {
				t.Fatal(err)
			}
			var total int64
			for n, b := range tl.files {
				total += int64(len(b))
				b = append([]byte(nil), b...)
				if n == tl.newest {
					b = tc.damage(b)
				}
				if err := fsys.WriteFile(path.Join("/log", n), b); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Open(zaptest.NewLogger(t), "/log", Options{FS: fsys, SegmentBytes: 1 << 20})
			if err != nil {
				t.Fatalf("the torn tail of an unacknowledged append was not truncated: %v", err)
			}
			defer l.Close()
			if got, want := l.Size(), total-frameLen([][]byte{rec}); got != want {
				t.Fatalf("log of %d bytes after recovery, want %d (the torn frame cut)", got, want)
			}
		})
	}
}
