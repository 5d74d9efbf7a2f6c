package statelog

import (
	"encoding/binary"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestNewerFormatIsNotDamage opens logs holding a file that a newer release could have written:
// intact checksums, but a format version, flags or reserved bits this release does not know (a
// downgrade after an upgrade). Open, Load and Scan refuse them with ErrUnsupportedFormat rather
// than as corruption, and Repair, with or without changes kept, leaves every file as it is
// instead of dropping the records in them.
func TestNewerFormatIsNotDamage(t *testing.T) {
	pristine, pristineSegs, _ := buildTableLog(t, func(l *Log) {
		if err := l.SetStartOffset(1); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
	segHeader := func(seg int, edit func(b []byte)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, filepath.Base(pristineSegs[seg])), func(b []byte) []byte {
				edit(b)
				binary.LittleEndian.PutUint32(b[28:], crc(b[:28]))
				return b
			})
		}
	}
	startFile := func(edit func(b []byte)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, startFileName), func(b []byte) []byte {
				edit(b)
				binary.LittleEndian.PutUint32(b[16:], crc(b[:16]))
				return b
			})
		}
	}
	tests := []struct {
		name   string
		file   string
		reason string
		damage func(t *testing.T, dir string)
	}{
		{name: "first segment version 2", file: filepath.Base(pristineSegs[0]), reason: "segment format version 2",
			damage: segHeader(0, func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 2) })},
		{name: "newest segment version 2", file: filepath.Base(pristineSegs[ctSegments-1]), reason: "segment format version 2",
			damage: segHeader(ctSegments-1, func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 2) })},
		{name: "segment flags", file: filepath.Base(pristineSegs[1]), reason: "segment header flags 0x1",
			damage: segHeader(1, func(b []byte) { binary.LittleEndian.PutUint16(b[6:], 1) })},
		{name: "segment reserved field", file: filepath.Base(pristineSegs[1]), reason: "reserved field 0x8",
			damage: segHeader(1, func(b []byte) { binary.LittleEndian.PutUint32(b[24:], 8) })},
		{name: "log-start offset file version 2", file: startFileName, reason: "log-start offset file format version 2",
			damage: startFile(func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 2) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, pristine)
			tc.damage(t, dir)
			before := dirContent(t, dir)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrUnsupportedFormat) || errors.As(err, new(*CorruptionError)) {
					t.Fatalf("%s = %v, want ErrUnsupportedFormat and no *CorruptionError", what, err)
				}
				if msg := err.Error(); !strings.Contains(msg, filepath.Join(dir, tc.file)) || !strings.Contains(msg, tc.reason) {
					t.Fatalf("%s = %q, want it to name %s and say %q", what, msg, tc.file, tc.reason)
				}
			}
			_, err := Open(zaptest.NewLogger(t), dir, ctOptions())
			check("Open", err)
			_, err = Load(zaptest.NewLogger(t), dir, ctOptions(), func(int64, []byte) error { return nil })
			check("Load", err)
			check("Scan", Scan(zaptest.NewLogger(t), dir, ctOptions(), func(int64, []byte) error { return nil }))
			report, err := Repair(zaptest.NewLogger(t), dir, ctOptions())
			check("Repair", err)
			if len(report.Corruptions) != 0 || report.DroppedBytes != 0 || len(report.DeletedSegments) != 0 || report.StartOffsetReset {
				t.Fatalf("Repair report %+v, want nothing done", report)
			}
			if after := dirContent(t, dir); !maps.Equal(before, after) {
				t.Fatal("a refused open or repair changed the log")
			}
			if _, err := Open(zaptest.NewLogger(t), dir, ctOptions()); !errors.Is(err, ErrUnsupportedFormat) {
				t.Fatalf("Open after a refused Repair = %v, want ErrUnsupportedFormat still", err)
			}
		})
	}
}

// An earlier format version than this release's was never written by any release: an intact
// file claiming one is damage, not a newer release's file.
func TestEarlierFormatVersionIsDamage(t *testing.T) {
	var b [segmentHeaderSize]byte
	segmentHeader{id: 1, base: 0}.encode(b[:])
	binary.LittleEndian.PutUint16(b[4:], formatVersion-1)
	binary.LittleEndian.PutUint32(b[28:], crc(b[:28]))
	if _, intact, reason, unsupported := decodeSegmentHeader(b[:]); !intact || reason == "" || unsupported {
		t.Fatalf("segment header of version %d: intact %v, reason %q, unsupported %v; want damage", formatVersion-1, intact, reason, unsupported)
	}
	var o [startFileSize]byte
	encodeOffsetFile(o[:], startMagic, 7)
	binary.LittleEndian.PutUint16(o[4:], formatVersion-1)
	binary.LittleEndian.PutUint32(o[16:], crc(o[:16]))
	if _, reason, unsupported := decodeOffsetFile(o[:], startMagic, "log-start offset file"); reason == "" || unsupported {
		t.Fatalf("offset file of version %d: reason %q, unsupported %v; want damage", formatVersion-1, reason, unsupported)
	}
}
