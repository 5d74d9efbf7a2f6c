package statelog

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
)

const benchRecordBytes = 150

// BenchmarkAppend measures durable appends of batches of 150-byte records (kind=log) against
// the physical floor (kind=raw): a plain write+fdatasync loop writing the same bytes (the
// encoded frames) to a file in the same directory. MB/s counts record bytes for both.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		batch := fixedBatch(uint64(n), n, benchRecordBytes)
		b.Run(fmt.Sprintf("batch=%d/kind=log", n), func(b *testing.B) {
			l, err := Open(nil, b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.SetBytes(int64(n * benchRecordBytes))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
			reportRecords(b, n)
		})
		b.Run(fmt.Sprintf("batch=%d/kind=raw", n), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			frame := make([]byte, frameLen(batch))
			b.SetBytes(int64(n * benchRecordBytes))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Write(frame); err != nil {
					b.Fatal(err)
				}
				if err := rawDataSync(f); err != nil {
					b.Fatal(err)
				}
			}
			reportRecords(b, n)
		})
	}
}

// BenchmarkReplay measures replaying a log of 150-byte records written in batches of 256
// (kind=log) against the physical floor (kind=raw): reading the same segment files
// sequentially through a buffer of the same size and computing CRC-32C over every byte.
// Both read from the page cache. MB/s counts record bytes for both.
func BenchmarkReplay(b *testing.B) {
	for _, records := range []int{100_000, 400_000} {
		l := writeBenchLog(b, b.TempDir(), records)
		b.Run(fmt.Sprintf("records=%d/kind=log", records), func(b *testing.B) {
			b.SetBytes(int64(records * benchRecordBytes))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := l.Replay(0, func(int64, []byte) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if n != records {
					b.Fatalf("replayed %d records, want %d", n, records)
				}
			}
			reportRecords(b, records)
		})
		b.Run(fmt.Sprintf("records=%d/kind=raw", records), func(b *testing.B) {
			var paths []string
			for _, s := range l.segments {
				paths = append(paths, s.path)
			}
			buf := make([]byte, DefaultReadBufferBytes)
			table := crc32.MakeTable(crc32.Castagnoli)
			b.SetBytes(int64(records * benchRecordBytes))
			b.ReportAllocs()
			for b.Loop() {
				var sum uint32
				for _, p := range paths {
					sum = rawReadCRC(b, p, buf, table, sum)
				}
			}
			reportRecords(b, records)
		})
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func rawReadCRC(b *testing.B, path string, buf []byte, table *crc32.Table, sum uint32) uint32 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for {
		n, err := f.Read(buf)
		sum = crc32.Update(sum, table, buf[:n])
		if err == io.EOF {
			return sum
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures opening (and so verifying every checksum of) a log of 150-byte records.
func BenchmarkOpen(b *testing.B) {
	const records = 400_000
	dir := b.TempDir()
	if err := writeBenchLog(b, dir, records).Close(); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
		b.SetBytes(records * benchRecordBytes)
		b.ReportAllocs()
		for b.Loop() {
			l, err := Open(nil, dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
		reportRecords(b, records)
	})
}

// writeBenchLog writes records 150-byte records in batches of 256 to a new log in dir, with
// 16 MiB segments, and returns the log, still open.
func writeBenchLog(b *testing.B, dir string, records int) *Log {
	b.Helper()
	l, err := Open(nil, dir, Options{SegmentBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < records; i += 256 {
		if _, err := l.Append(fixedBatch(uint64(i), min(256, records-i), benchRecordBytes)); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

func reportRecords(b *testing.B, perOp int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(perOp)*float64(b.N)/s, "records/s")
	}
}
