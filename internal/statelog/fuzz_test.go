package statelog

import (
	"bytes"
	"errors"
	"path"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
	"go.uber.org/zap"
)

// fuzzSegment is the name the fuzzed bytes are stored under: base offset 0, id 1.
var fuzzSegment = path.Join("/log", segmentName(0, 1))

// FuzzOpenReplay stores arbitrary bytes as the only segment of a log (after a valid header when
// withHeader is set) and opens, replays and scans it. Nothing may panic, every error must be a
// *CorruptionError, and whatever is returned must be exactly the valid prefix of frames that an
// independent reference reader finds: never a record whose checksum failed.
func FuzzOpenReplay(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed, false)
		if len(seed) > segmentHeaderSize {
			f.Add(seed[segmentHeaderSize:], true)
		}
	}
	f.Add([]byte{}, false)
	f.Add([]byte("CDBF not really a frame"), true)
	f.Fuzz(func(t *testing.T, data []byte, withHeader bool) {
		file := data
		if withHeader {
			var hdr [segmentHeaderSize]byte
			segmentHeader{id: 1, base: 0}.encode(hdr[:])
			file = append(hdr[:], data...)
		}
		var wantRecs []rec
		for _, fr := range parseRef(file) {
			for i, r := range fr.records {
				wantRecs = append(wantRecs, rec{fr.base + int64(i), r})
			}
		}
		mem := faultfs.NewCrashFS()
		if err := mem.MkdirAll("/log"); err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteFile(fuzzSegment, file); err != nil {
			t.Fatal(err)
		}
		opts := Options{FS: mem, MaxRecordBytes: 1 << 16, ReadBufferBytes: 64}

		for _, p := range []string{fuzzSegment, "/log"} {
			var got []rec
			if err := Scan(zap.NewNop(), p, opts, collect(&got)); err != nil {
				if !errors.As(err, new(*CorruptionError)) {
					t.Fatalf("Scan(%s) = %v, want nil or a *CorruptionError", p, err)
				}
				continue
			}
			compareRecs(t, "Scan("+p+")", got, wantRecs)
		}

		l, err := Open(zap.NewNop(), "/log", opts)
		if err != nil {
			if !errors.As(err, new(*CorruptionError)) {
				t.Fatalf("Open = %v, want nil or a *CorruptionError", err)
			}
			return
		}
		defer l.Close()
		var got []rec
		if err := l.Replay(l.StartOffset(), collect(&got)); err != nil {
			t.Fatalf("Replay after a successful Open: %v", err)
		}
		compareRecs(t, "Replay", got, wantRecs)
		if _, err := l.Append([][]byte{[]byte("next")}); err != nil {
			t.Fatalf("Append after a successful Open: %v", err)
		}
	})
}

// fuzzSeeds returns segment files written by the log: whole, torn and damaged.
func fuzzSeeds(f *testing.F) [][]byte {
	mem := faultfs.NewCrashFS()
	l, err := Open(zap.NewNop(), "/log", Options{FS: mem})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		if _, err := l.Append(fixedBatch(uint64(i), 1+i, 10*i)); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	whole, err := mem.ReadFile(fuzzSegment)
	if err != nil {
		f.Fatal(err)
	}
	flipped := bytes.Clone(whole)
	flipped[len(flipped)/2] ^= 0x10
	return [][]byte{
		whole,
		whole[:segmentHeaderSize],
		whole[:len(whole)-3],
		whole[:segmentHeaderSize+frameHeaderSize+2],
		flipped,
		append(bytes.Clone(whole), whole[segmentHeaderSize:]...), // frames with the wrong offsets
	}
}
