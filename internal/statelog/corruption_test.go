package statelog

import (
	"encoding/binary"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// The corruption table works on a log of 3 segments × 3 frames × 2 records of 50 bytes.
const (
	ctRecords      = 2
	ctRecordSize   = 50
	ctFrame        = frameHeaderSize + ctRecords*(recordPrefixSize+ctRecordSize) // 136
	ctFramesPerSeg = 3
	ctSegments     = 3
)

func ctBatch(i int) [][]byte { return fixedBatch(uint64(i), ctRecords, ctRecordSize) }

func ctOptions() Options {
	return Options{SegmentBytes: segmentHeaderSize + ctFramesPerSeg*ctFrame}
}

// buildCorruptionLog writes the table's log, ends it as a killed process would (the damage is
// judged as after a crash), and returns its directory, segment paths and model.
func buildCorruptionLog(t *testing.T) (string, []string, [][]byte) {
	t.Helper()
	return buildTableLog(t, func(l *Log) { kill(t, l) })
}

// buildTableLog writes the table's log, ends it with end, and returns its directory, segment
// paths and model.
func buildTableLog(t *testing.T, end func(l *Log)) (string, []string, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	l := mustOpen(t, dir, ctOptions())
	var model [][]byte
	for i := range ctSegments * ctFramesPerSeg {
		mustAppend(t, l, ctBatch(i))
		model = append(model, ctBatch(i)...)
	}
	end(l)

	var segs []string
	for _, n := range segmentFiles(t, l.fs, dir) {
		segs = append(segs, filepath.Join(dir, n))
	}
	if len(segs) != ctSegments {
		t.Fatalf("built %d segments, want %d", len(segs), ctSegments)
	}
	return dir, segs, model
}

func framePos(f int) int64 { return segmentHeaderSize + int64(f)*ctFrame }

// recordsBefore is the number of records before frame f of segment s.
func recordsBefore(s, f int) int { return (s*ctFramesPerSeg + f) * ctRecords }

func editFile(t *testing.T, path string, edit func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Frame damages: each edits the frame at pos of a segment's bytes.
var frameDamages = []struct {
	name string
	// intact: the frame's checksums still hold, so no interrupted write explains it.
	intact bool
	edit   func(b []byte, pos int64) []byte
}{
	{name: "bad length", edit: func(b []byte, pos int64) []byte {
		binary.LittleEndian.PutUint32(b[pos+8:], binary.LittleEndian.Uint32(b[pos+8:])+1)
		return b
	}},
	{name: "bad length with header checksum fixed", edit: func(b []byte, pos int64) []byte {
		binary.LittleEndian.PutUint32(b[pos+8:], binary.LittleEndian.Uint32(b[pos+8:])-4)
		binary.LittleEndian.PutUint32(b[pos+24:], crc(b[pos:pos+24]))
		return b
	}},
	{name: "bad payload checksum", edit: func(b []byte, pos int64) []byte {
		b[pos+frameHeaderSize+10] ^= 0x01
		return b
	}},
	{name: "bad header magic", edit: func(b []byte, pos int64) []byte {
		b[pos] ^= 0x80
		return b
	}},
	{name: "garbage", edit: func(b []byte, pos int64) []byte {
		rng := rand.New(rand.NewPCG(uint64(pos), 7))
		for i := pos; i < pos+ctFrame; i++ {
			b[i] = byte(rng.Uint32())
		}
		return b
	}},
	{name: "zeros", edit: func(b []byte, pos int64) []byte {
		clear(b[pos : pos+ctFrame])
		return b
	}},
	{name: "wrong base offset, checksums valid", intact: true, edit: func(b []byte, pos int64) []byte {
		binary.LittleEndian.PutUint64(b[pos+12:], binary.LittleEndian.Uint64(b[pos+12:])+1)
		binary.LittleEndian.PutUint32(b[pos+24:], crc(b[pos:pos+24]))
		return b
	}},
	{name: "malformed records, checksums valid", intact: true, edit: func(b []byte, pos int64) []byte {
		p := b[pos+frameHeaderSize : pos+ctFrame]
		binary.LittleEndian.PutUint32(p, ctRecordSize+4) // first record swallows the second's prefix
		binary.LittleEndian.PutUint32(b[pos+20:], crc(p))
		binary.LittleEndian.PutUint32(b[pos+24:], crc(b[pos:pos+24]))
		return b
	}},
}

// rebase returns a copy of frame with its base offset set to base, checksums fixed.
func rebase(frame []byte, base int) []byte {
	f := append([]byte(nil), frame...)
	binary.LittleEndian.PutUint64(f[12:], uint64(base))
	binary.LittleEndian.PutUint32(f[24:], crc(f[:24]))
	return f
}

// frameDamage returns the edit of the named frame damage.
func frameDamage(t *testing.T, name string) func(b []byte, pos int64) []byte {
	t.Helper()
	for _, d := range frameDamages {
		if d.name == name {
			return d.edit
		}
	}
	t.Fatalf("no frame damage named %q", name)
	return nil
}

type corruptionCase struct {
	name   string
	damage func(t *testing.T, dir string, segs []string)
	// Expected outcome of Open.
	torn       bool   // Open succeeds, truncating a torn tail
	corruptSeg string // else: the file CorruptionError names ("" → segs[corruptIdx])
	corruptIdx int
	corruptAt  int64
	// Records present after Open (torn) or after Repair (corruption).
	keep int
}

func corruptionCases() []corruptionCase {
	var cases []corruptionCase
	lastSeg := ctSegments - 1
	for _, d := range frameDamages {
		// The last frame of the newest segment: a torn tail, unless the frame is intact.
		cases = append(cases, corruptionCase{
			name: "newest segment/last frame/" + d.name,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte { return d.edit(b, framePos(ctFramesPerSeg-1)) })
			},
			torn: !d.intact, corruptIdx: lastSeg, corruptAt: framePos(ctFramesPerSeg - 1),
			keep: recordsBefore(lastSeg, ctFramesPerSeg-1),
		})
		// A frame of the newest segment that a valid frame follows: corruption.
		cases = append(cases, corruptionCase{
			name: "newest segment/middle frame/" + d.name,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte { return d.edit(b, framePos(1)) })
			},
			corruptIdx: lastSeg, corruptAt: framePos(1), keep: recordsBefore(lastSeg, 1),
		})
		// Any frame of an older segment: corruption.
		cases = append(cases, corruptionCase{
			name: "older segment/last frame/" + d.name,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[0], func(b []byte) []byte { return d.edit(b, framePos(ctFramesPerSeg-1)) })
			},
			corruptIdx: 0, corruptAt: framePos(ctFramesPerSeg - 1), keep: recordsBefore(0, ctFramesPerSeg-1),
		})
	}
	cases = append(cases,
		corruptionCase{name: "newest segment/trailing garbage", torn: true, keep: ctSegments * ctFramesPerSeg * ctRecords,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte { return append(b, "partial frame"...) })
			}},
		corruptionCase{name: "newest segment/garbage full of frame magic", torn: true, keep: ctSegments * ctFramesPerSeg * ctRecords,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte {
					for i := range 2000 {
						b = binary.LittleEndian.AppendUint32(b, frameMagic)
						b = append(b, byte(i))
					}
					return b
				})
			}},
		corruptionCase{name: "newest segment/intact frame after unaligned garbage", corruptIdx: lastSeg,
			corruptAt: framePos(ctFramesPerSeg), keep: ctSegments * ctFramesPerSeg * ctRecords,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte {
					// An acknowledged frame whose header got damaged, and the next frame, which
					// continues the offsets past it (not at a multiple of anything).
					next := ctSegments * ctFramesPerSeg * ctRecords
					damaged := rebase(b[framePos(0):framePos(1)], next)
					damaged[0] ^= 0xff
					later := rebase(b[framePos(0):framePos(1)], next+ctRecords)
					return append(append(append(b, damaged...), "xyz"...), later...)
				})
			}},
		// An intact frame whose offsets do not continue the log cannot have been written after
		// the damage (a client's record can hold such bytes): the damage is a torn tail.
		corruptionCase{name: "newest segment/earlier frame's copy after unaligned garbage", torn: true,
			keep: ctSegments * ctFramesPerSeg * ctRecords,
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte {
					first := append([]byte(nil), b[framePos(0):framePos(1)]...)
					return append(append(b, "xyz"...), first...)
				})
			}},
		corruptionCase{name: "newest segment/bad frame followed by an intact but malformed one", corruptIdx: lastSeg,
			corruptAt: framePos(ctFramesPerSeg - 1), keep: recordsBefore(lastSeg, ctFramesPerSeg-1),
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte {
					b[framePos(ctFramesPerSeg-1)+frameHeaderSize+1] ^= 0x01 // torn-looking last frame
					malformed := frameDamage(t, "malformed records, checksums valid")(append([]byte(nil), b[:framePos(1)]...), framePos(0))
					return append(b, malformed[framePos(0):]...)
				})
			}},
		corruptionCase{name: "older segment/trailing garbage", corruptIdx: 1, corruptAt: framePos(ctFramesPerSeg), keep: recordsBefore(2, 0),
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[1], func(b []byte) []byte { return append(b, "junk"...) })
			}},
		corruptionCase{name: "older segment/truncated", corruptIdx: 1, corruptAt: framePos(2), keep: recordsBefore(1, 2),
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[1], func(b []byte) []byte { return b[:len(b)-5] })
			}},
		corruptionCase{name: "older segment/bad header", corruptIdx: 1, corruptAt: 0, keep: recordsBefore(1, 0),
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[1], func(b []byte) []byte { b[3] ^= 0xff; return b })
			}},
		corruptionCase{name: "newest segment/bad header with frames after it", corruptIdx: lastSeg, corruptAt: 0, keep: recordsBefore(lastSeg, 0),
			damage: func(t *testing.T, _ string, segs []string) {
				editFile(t, segs[lastSeg], func(b []byte) []byte { b[20] ^= 0xff; return b })
			}},
		corruptionCase{name: "segment name disagrees with header", corruptSeg: "renamed", corruptAt: 0, keep: recordsBefore(1, 0),
			damage: func(t *testing.T, dir string, segs []string) {
				if err := os.Rename(segs[1], filepath.Join(dir, segmentName(7, 2))); err != nil {
					t.Fatal(err)
				}
			}},
		corruptionCase{name: "missing middle segment", corruptIdx: 2, corruptAt: 0, keep: recordsBefore(1, 0),
			damage: func(t *testing.T, _ string, segs []string) {
				if err := os.Remove(segs[1]); err != nil {
					t.Fatal(err)
				}
			}},
		corruptionCase{name: "segment ids out of order", corruptSeg: "reordered", corruptAt: 0, keep: recordsBefore(2, 0),
			damage: func(t *testing.T, dir string, segs []string) {
				if err := os.Rename(segs[2], filepath.Join(dir, segmentName(12, 1))); err != nil {
					t.Fatal(err)
				}
			}},
		corruptionCase{name: "unrecognised segment file", corruptSeg: "stray", corruptAt: 0, keep: ctSegments * ctFramesPerSeg * ctRecords,
			damage: func(t *testing.T, dir string, _ []string) {
				if err := os.WriteFile(filepath.Join(dir, "copy-of-a-segment.seg"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
	)
	return cases
}

// damagedCopy copies the table's pristine log and applies tc's damage to the copy; it returns
// the copy's directory and segment paths.
func damagedCopy(t *testing.T, pristine string, pristineSegs []string, tc corruptionCase) (string, []string) {
	t.Helper()
	dir := copyDir(t, pristine)
	segs := make([]string, len(pristineSegs))
	for i, s := range pristineSegs {
		segs[i] = filepath.Join(dir, filepath.Base(s))
	}
	tc.damage(t, dir, segs)
	return dir, segs
}

func TestCorruptionTable(t *testing.T) {
	pristine, pristineSegs, model := buildCorruptionLog(t)
	for _, tc := range corruptionCases() {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs := damagedCopy(t, pristine, pristineSegs, tc)
			wantSeg := ""
			switch tc.corruptSeg {
			case "":
				wantSeg = segs[tc.corruptIdx]
			case "renamed":
				wantSeg = filepath.Join(dir, segmentName(7, 2))
			case "reordered":
				wantSeg = filepath.Join(dir, segmentName(12, 1))
			case "stray":
				wantSeg = filepath.Join(dir, "copy-of-a-segment.seg")
			}
			reg := prometheus.NewRegistry()
			opts := ctOptions()
			opts.Metrics, opts.Name = NewMetrics(reg), "3"
			before := dirContent(t, dir)

			l, err := Open(zaptest.NewLogger(t), dir, opts)
			if tc.torn {
				if err != nil {
					t.Fatalf("Open = %v, want a torn tail truncated", err)
				}
				checkRecords(t, readAll(t, l, 0), want(model[:tc.keep], 0))
				if got := metricValue(t, reg, "sharecoord_state_log_torn_tail_truncations_total", "3"); got != 1 {
					t.Fatalf("torn-tail truncations = %v, want 1", got)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				report, err := Repair(zaptest.NewLogger(t), dir, opts)
				if err != nil || len(report.Corruptions) != 0 || report.DroppedBytes != 0 {
					t.Fatalf("Repair of a recovered log = %+v, %v; want a zero report", report, err)
				}
				return
			}

			ce := asCorruption(t, err)
			if ce.Segment != wantSeg || ce.Offset != tc.corruptAt {
				t.Fatalf("corruption at %s byte %d (%s), want %s byte %d", ce.Segment, ce.Offset, ce.Reason, wantSeg, tc.corruptAt)
			}
			if got := metricValue(t, reg, "sharecoord_state_log_corruptions_total", "3"); got != 1 {
				t.Fatalf("corruptions = %v, want 1", got)
			}
			if after := dirContent(t, dir); !maps.Equal(before, after) {
				t.Fatal("Open changed a corrupt log")
			}
			// Scan reports the same corruption and changes nothing.
			err = Scan(zaptest.NewLogger(t), dir, ctOptions(), func(int64, []byte) error { return nil })
			if sce := asCorruption(t, err); sce.Segment != ce.Segment || sce.Offset != ce.Offset {
				t.Fatalf("Scan found corruption at %s byte %d, Open at %s byte %d", sce.Segment, sce.Offset, ce.Segment, ce.Offset)
			}

			report, err := Repair(zaptest.NewLogger(t), dir, ctOptions())
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			if len(report.Corruptions) == 0 || report.Corruptions[0].Segment != ce.Segment || report.Corruptions[0].Offset != ce.Offset {
				t.Fatalf("Repair reported %v, want first the corruption Open found", report.Corruptions)
			}
			if report.DroppedBytes > 0 && report.DroppedFromOffset != int64(tc.keep) {
				t.Fatalf("Repair says records from %d were dropped, want %d", report.DroppedFromOffset, tc.keep)
			}
			l = mustOpen(t, dir, ctOptions())
			checkRecords(t, readAll(t, l, l.StartOffset()), want(model[:tc.keep], l.StartOffset()))
			if l.EndOffset() != int64(tc.keep) {
				t.Fatalf("EndOffset after repair = %d, want %d", l.EndOffset(), tc.keep)
			}
			mustAppend(t, l, ctBatch(100))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := Repair(zaptest.NewLogger(t), dir, ctOptions())
			if err != nil || len(again.Corruptions) != 0 || again.DroppedBytes != 0 || len(again.DeletedSegments) != 0 {
				t.Fatalf("second Repair = %+v, %v; want a zero report", again, err)
			}
		})
	}
}

func TestRepairReport(t *testing.T) {
	dir, segs, model := buildCorruptionLog(t)
	sizes := make([]int64, len(segs))
	for i, s := range segs {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		sizes[i] = fi.Size()
	}
	// Damage the second frame of the middle segment.
	editFile(t, segs[1], func(b []byte) []byte { b[framePos(1)+40] ^= 1; return b })
	report, err := Repair(zaptest.NewLogger(t), dir, ctOptions())
	if err != nil {
		t.Fatal(err)
	}
	wantReport := RepairReport{
		TruncatedSegment:  segs[1],
		TruncatedAt:       framePos(1),
		DeletedSegments:   []string{segs[2]},
		DroppedBytes:      sizes[1] - framePos(1) + sizes[2],
		DroppedFromOffset: int64(recordsBefore(1, 1)),
	}
	if len(report.Corruptions) != 1 || report.TruncatedSegment != wantReport.TruncatedSegment || report.TruncatedAt != wantReport.TruncatedAt ||
		len(report.DeletedSegments) != 1 || report.DeletedSegments[0] != segs[2] ||
		report.DroppedBytes != wantReport.DroppedBytes || report.DroppedFromOffset != wantReport.DroppedFromOffset || report.StartOffsetReset ||
		report.StartOffset != 0 || report.EndOffset != wantReport.DroppedFromOffset {
		t.Fatalf("Repair report %+v, want %+v with one corruption", report, wantReport)
	}
	l := mustOpen(t, dir, ctOptions())
	checkRecords(t, readAll(t, l, 0), want(model[:recordsBefore(1, 1)], 0))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A healthy log is left untouched.
	before := dirContent(t, dir)
	report, err = Repair(zaptest.NewLogger(t), dir, ctOptions())
	if err != nil {
		t.Fatal(err)
	}
	if report.StartOffsetReset || report.DroppedBytes != 0 || len(report.Corruptions) != 0 ||
		len(report.DeletedSegments) != 0 || report.TruncatedSegment != "" {
		t.Fatalf("Repair of a healthy log = %+v, want the zero report", report)
	}
	if after := dirContent(t, dir); !maps.Equal(before, after) {
		t.Fatal("Repair changed a healthy log")
	}
	if _, err := Repair(zaptest.NewLogger(t), filepath.Join(dir, "missing"), ctOptions()); err == nil {
		t.Fatal("Repair of a missing directory succeeded")
	} else if errors.As(err, new(*CorruptionError)) {
		t.Fatalf("Repair of a missing directory = %v, want an I/O error", err)
	}
}

// TestReplayDetectsDamageAfterOpen damages a segment under an open log: Replay must report
// a *CorruptionError at the damaged frame (and count it), never deliver its records or panic.
func TestReplayDetectsDamageAfterOpen(t *testing.T) {
	tests := []struct {
		name string
		edit func(b []byte) []byte
		at   int64
	}{
		{name: "payload checksum", at: framePos(1), edit: func(b []byte) []byte {
			b[framePos(1)+frameHeaderSize+3] ^= 0x40
			return b
		}},
		{name: "header checksum", at: framePos(2), edit: func(b []byte) []byte {
			b[framePos(2)+5] ^= 0x40
			return b
		}},
		{name: "malformed records, checksums valid", at: framePos(1), edit: func(b []byte) []byte {
			pos := framePos(1)
			p := b[pos+frameHeaderSize : pos+ctFrame]
			binary.LittleEndian.PutUint32(p[recordPrefixSize+ctRecordSize:], ctRecordSize+1) // second record overruns
			binary.LittleEndian.PutUint32(b[pos+20:], crc(p))
			binary.LittleEndian.PutUint32(b[pos+24:], crc(b[pos:pos+24]))
			return b
		}},
		{name: "segment shrank", at: framePos(2) - 1, edit: func(b []byte) []byte { return b[:framePos(2)-1] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs, _ := buildCorruptionLog(t)
			reg := prometheus.NewRegistry()
			opts := ctOptions()
			opts.Metrics, opts.Name = NewMetrics(reg), "1"
			l := mustOpen(t, dir, opts)
			editFile(t, segs[1], tc.edit)
			var delivered []int64
			err := l.Replay(0, func(off int64, _ []byte) error {
				delivered = append(delivered, off)
				return nil
			})
			ce := asCorruption(t, err)
			if ce.Segment != segs[1] || ce.Offset != tc.at {
				t.Fatalf("corruption at %s byte %d (%s), want %s byte %d", ce.Segment, ce.Offset, ce.Reason, segs[1], tc.at)
			}
			if tc.name != "segment shrank" {
				if n := len(delivered); n != recordsBefore(1, int((tc.at-segmentHeaderSize)/ctFrame)) {
					t.Fatalf("%d records delivered before the damaged frame, want %d", n, recordsBefore(1, int((tc.at-segmentHeaderSize)/ctFrame)))
				}
			}
			if got := metricValue(t, reg, "sharecoord_state_log_corruptions_total", "1"); got != 1 {
				t.Fatalf("corruptions = %v, want 1", got)
			}
		})
	}
}

// A repair whose corruption point lies below the log-start offset leaves a log without a record:
// the report says so with equal start and end offsets, for repair-log to spell out.
func TestRepairReportsAnEmptiedLog(t *testing.T) {
	dir, segs, _ := buildCorruptionLog(t)
	last := len(segs) - 1
	l := mustOpen(t, dir, ctOptions())
	if err := l.SetStartOffset(int64(recordsBefore(last, 2))); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage a frame of the newest segment below the log-start offset, followed by intact ones.
	editFile(t, segs[last], func(b []byte) []byte { b[framePos(1)+40] ^= 1; return b })
	report, err := Repair(zaptest.NewLogger(t), dir, ctOptions())
	if err != nil {
		t.Fatal(err)
	}
	cut := int64(recordsBefore(last, 1))
	if !report.StartOffsetReset || report.StartOffset != cut || report.EndOffset != cut {
		t.Fatalf("Repair report %+v, want the log-start offset reset to %d and an empty log [%d, %d)", report, cut, cut, cut)
	}
	l = mustOpen(t, dir, ctOptions())
	defer func() { _ = l.Close() }()
	if l.StartOffset() != cut || l.EndOffset() != cut {
		t.Fatalf("repaired log holds [%d, %d), want [%d, %d)", l.StartOffset(), l.EndOffset(), cut, cut)
	}
}
