package statelog

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// BenchmarkLoad measures reading one log of 150-byte records back at start (page cache warm):
// path=open-replay verifies every frame in Open and again in Replay, path=load verifies each
// frame once while handing its records over.
func BenchmarkLoad(b *testing.B) {
	const records = 400_000
	dir := b.TempDir()
	if err := writeBenchLog(b, dir, records).Close(); err != nil {
		b.Fatal(err)
	}
	count := func(n *int) func(int64, []byte) error {
		return func(int64, []byte) error { *n++; return nil }
	}
	b.Run(fmt.Sprintf("records=%d/path=open-replay", records), func(b *testing.B) {
		b.SetBytes(records * benchRecordBytes)
		b.ReportAllocs()
		for b.Loop() {
			var n int
			l, err := Open(nil, dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Replay(l.StartOffset(), count(&n)); err != nil {
				b.Fatal(err)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			if n != records {
				b.Fatalf("%d records, want %d", n, records)
			}
		}
		reportRecords(b, records)
	})
	b.Run(fmt.Sprintf("records=%d/path=load", records), func(b *testing.B) {
		b.SetBytes(records * benchRecordBytes)
		b.ReportAllocs()
		for b.Loop() {
			var n int
			l, err := Load(nil, dir, Options{}, count(&n))
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			if n != records {
				b.Fatalf("%d records, want %d", n, records)
			}
		}
		reportRecords(b, records)
	})
}

// BenchmarkSharedSync measures durable appends spread over 50 logs of one directory, one
// goroutine per log, each op being one small append to every log: sync=file fdatasyncs each
// log, sync=filesystem shares syncfs(2) rounds among them. syncs/op counts the syncs made.
func BenchmarkSharedSync(b *testing.B) {
	const logs = 50
	batch := fixedBatch(1, 2, benchRecordBytes)
	for _, mode := range []string{"file", "filesystem"} {
		b.Run(fmt.Sprintf("logs=%d/sync=%s", logs, mode), func(b *testing.B) {
			root := b.TempDir()
			var g *SyncGroup
			if mode == "filesystem" {
				var err error
				if g, err = NewSyncGroup(nil, root, SyncGroupOptions{}); err != nil {
					b.Fatal(err)
				}
				defer g.Close()
			}
			ls := make([]*Log, logs)
			for i := range ls {
				l, err := Open(nil, filepath.Join(root, strconv.Itoa(i)), Options{SyncGroup: g})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ls[i] = l
			}
			b.SetBytes(logs * int64(len(batch)*benchRecordBytes))
			b.ReportAllocs()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, l := range ls {
					wg.Go(func() {
						if _, err := l.Append(batch); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			syncs := float64(b.N * logs)
			if g != nil {
				syncs = float64(g.Syncs())
			}
			b.ReportMetric(syncs/float64(b.N), "syncs/op")
			reportRecords(b, logs*len(batch))
		})
	}
}
