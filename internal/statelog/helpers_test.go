package statelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
)

// rec is a record read back from a log.
type rec struct {
	off  int64
	data []byte
}

// makeBatch returns n records of random sizes in [minSize, maxSize], deterministic in rng.
func makeBatch(rng *rand.Rand, n, minSize, maxSize int) [][]byte {
	batch := make([][]byte, n)
	for i := range batch {
		b := make([]byte, minSize+rng.IntN(maxSize-minSize+1))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		batch[i] = b
	}
	return batch
}

// fixedBatch returns n records of exactly size bytes, each distinct.
func fixedBatch(seed uint64, n, size int) [][]byte {
	return makeBatch(rand.New(rand.NewPCG(seed, 1)), n, size, size)
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(zaptest.NewLogger(t), dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, batch [][]byte) int64 {
	t.Helper()
	first, err := l.Append(batch)
	if err != nil {
		t.Fatalf("Append(%d records): %v", len(batch), err)
	}
	return first
}

// collect returns a record callback that appends a copy of every record to out.
func collect(out *[]rec) func(off int64, r []byte) error {
	return func(off int64, r []byte) error {
		*out = append(*out, rec{off, bytes.Clone(r)})
		return nil
	}
}

// readAll replays l from from and copies every record.
func readAll(t testing.TB, l *Log, from int64) []rec {
	t.Helper()
	var out []rec
	if err := l.Replay(from, collect(&out)); err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return out
}

// want turns the model (records by offset) into the records expected from offset from.
func want(model [][]byte, from int64) []rec {
	var out []rec
	for off := from; off < int64(len(model)); off++ {
		out = append(out, rec{off, model[off]})
	}
	return out
}

func checkRecords(t testing.TB, got, want []rec) {
	t.Helper()
	compareRecs(t, "the log", got, want)
}

// compareRecs fails the test unless got, the records what returned, are want.
func compareRecs(t testing.TB, what string, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s returned %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].off != want[i].off || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("%s: record %d has offset %d (%d bytes), want offset %d (%d bytes)",
				what, i, got[i].off, len(got[i].data), want[i].off, len(want[i].data))
		}
	}
}

func segmentFiles(t testing.TB, fsys FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s): %v", dir, err)
	}
	var segs []string
	for _, n := range names {
		if filepath.Ext(n) == segmentSuffix {
			segs = append(segs, n)
		}
	}
	return segs
}

// refFrame is a frame found by the reference parser.
type refFrame struct {
	pos, end int64
	base     int64
	records  [][]byte
}

// parseRef is an independent reference reader of one segment's bytes: it returns the frames
// of the valid prefix after the header, checking both checksums and the record structure, and
// stops at the first frame that does not verify. It shares no code with the package.
func parseRef(b []byte) []refFrame {
	table := crc32.MakeTable(crc32.Castagnoli)
	if len(b) < 32 || binary.LittleEndian.Uint32(b) != 0x47534443 ||
		crc32.Checksum(b[:28], table) != binary.LittleEndian.Uint32(b[28:]) {
		return nil
	}
	next := int64(binary.LittleEndian.Uint64(b[16:]))
	var out []refFrame
	pos := 32
	for len(b)-pos >= 28 {
		h := b[pos : pos+28]
		if binary.LittleEndian.Uint32(h) != 0x46424443 || crc32.Checksum(h[:24], table) != binary.LittleEndian.Uint32(h[24:]) {
			break
		}
		count := int(binary.LittleEndian.Uint32(h[4:]))
		n := int(binary.LittleEndian.Uint32(h[8:]))
		base := int64(binary.LittleEndian.Uint64(h[12:]))
		if count == 0 || base != next || n > len(b)-pos-28 {
			break
		}
		p := b[pos+28 : pos+28+n]
		if crc32.Checksum(p, table) != binary.LittleEndian.Uint32(h[20:]) {
			break
		}
		var recs [][]byte
		for len(p) >= 4 && len(recs) < count {
			l := int(binary.LittleEndian.Uint32(p))
			if l > len(p)-4 {
				break
			}
			recs = append(recs, p[4:4+l])
			p = p[4+l:]
		}
		if len(recs) != count || len(p) != 0 {
			break
		}
		out = append(out, refFrame{pos: int64(pos), end: int64(pos + 28 + n), base: base, records: recs})
		next += int64(count)
		pos += 28 + n
	}
	return out
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	for name, b := range dirContent(t, src) {
		if err := os.WriteFile(filepath.Join(dst, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// dirContent maps each file of dir to its content.
func dirContent(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// metricValue returns the value of the counter or gauge name{partition=partition}, or of the
// histogram's sample count, from reg.
func metricValue(t testing.TB, reg *prometheus.Registry, name, partition string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if partition != "" && !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool {
				return lp.GetName() == "partition" && lp.GetValue() == partition
			}) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("metric %s{partition=%q} not found", name, partition)
	return 0
}

// asCorruption returns err as a *CorruptionError or fails the test.
func asCorruption(t testing.TB, err error) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v, want a *CorruptionError", err)
	}
	return ce
}

func frameLen(batch [][]byte) int64 {
	n := int64(frameHeaderSize)
	for _, r := range batch {
		n += recordPrefixSize + int64(len(r))
	}
	return n
}

var errEIO = syscall.EIO

// kill ends l as a killed process would: its files are closed, and no clean-end file records
// where it ended, so the next Open judges its tail as after a crash.
func kill(t testing.TB, l *Log) {
	t.Helper()
	l.closed = true
	if err := l.closeFiles(); err != nil {
		t.Fatal(err)
	}
}

// encodedFrame is the frame Append writes for records starting at offset base.
func encodedFrame(records [][]byte, base int64) []byte {
	buf := make([]byte, frameLen(records))
	encodeFrame(buf, records, base)
	return buf
}
