package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// windowGen produces the records of realistic share partitions: each key keeps a sliding window of
// a few tens of batches; an update advances the start offset past the oldest batch, appends one or
// two batches after the newest, and sometimes acknowledges a batch in the middle.
type windowGen struct {
	window int
	r      *rand.Rand
	keys   []string
	states [][]StateBatch
	so     []int64
}

func newWindowGen(nKeys, window int) *windowGen {
	g := &windowGen{window: window, r: rand.New(rand.NewPCG(uint64(nKeys), 1))}
	for i := 0; i < nKeys; i++ {
		mk, _ := record.EncodeKey(record.Key{GroupID: fmt.Sprintf("group-%d", i%50), TopicID: testTopic, Partition: int32(i)})
		g.keys = append(g.keys, mk)
		var w []StateBatch
		off := int64(1000)
		for j := 0; j < window; j++ {
			n := int64(1 + g.r.IntN(20))
			w = append(w, StateBatch{FirstOffset: off, LastOffset: off + n - 1, DeliveryState: int8(j % 2 * 2), DeliveryCount: 1})
			off += n
		}
		g.states = append(g.states, w)
		g.so = append(g.so, 1000)
	}
	return g
}

func (g *windowGen) snapshot(dst []byte, i int) []byte {
	v := record.SnapshotValue{SnapshotEpoch: 0, StateEpoch: 1, StartOffset: g.so[i], StateBatches: g.states[i], DeliveryCompleteCount: 0}
	return record.AppendSnapshot(dst, g.keys[i], &v)
}

func (g *windowGen) update(dst []byte, i int) []byte {
	w := g.states[i]
	var batches []StateBatch
	// Advance the start offset past the oldest batches, keeping the window's length.
	for len(w) >= g.window {
		g.so[i] = w[0].LastOffset + 1
		w = w[1:]
	}
	if g.r.IntN(10) < 3 && len(w) > 2 {
		m := w[g.r.IntN(len(w)-1)]
		m.DeliveryState, m.DeliveryCount = 4, m.DeliveryCount+1
		batches = append(batches, m)
	}
	last := w[len(w)-1]
	off := last.LastOffset + 1
	state := 2 - last.DeliveryState // alternate so neighbours do not coalesce
	for n := 1 + g.r.IntN(2); n > 0; n-- {
		l := int64(1 + g.r.IntN(20))
		s := StateBatch{FirstOffset: off, LastOffset: off + l - 1, DeliveryState: state, DeliveryCount: 1}
		state = 2 - state
		batches = append(batches, s)
		w = append(w, s)
		off += l
	}
	var c combiner
	g.states[i] = c.combineBatches(w, batches, g.so[i])
	v := record.UpdateValue{SnapshotEpoch: 0, LeaderEpoch: 1, StartOffset: g.so[i], StateBatches: batches, DeliveryCompleteCount: 3}
	return record.AppendUpdate(dst, g.keys[i], &v)
}

// replayCorpus is a log's worth of records: one snapshot per key, then updates round-robin.
type replayCorpus struct {
	buf     []byte
	ends    []int
	updates int
}

func (c *replayCorpus) record(i int) []byte {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.buf[start:c.ends[i]]
}

func buildCorpus(nKeys, updatesPerKey int) *replayCorpus {
	return buildCorpusWindow(nKeys, updatesPerKey, 30)
}

func buildCorpusWindow(nKeys, updatesPerKey, window int) *replayCorpus {
	g := newWindowGen(nKeys, window)
	c := &replayCorpus{}
	for i := range g.keys {
		c.buf = g.snapshot(c.buf, i)
		c.ends = append(c.ends, len(c.buf))
	}
	for u := 0; u < updatesPerKey; u++ {
		for i := range g.keys {
			c.buf = g.update(c.buf, i)
			c.ends = append(c.ends, len(c.buf))
			c.updates++
		}
	}
	return c
}

type fixedLimit int

func (f fixedLimit) SnapshotUpdateRecordsPerSnapshot(string) int { return int(f) }

// BenchmarkReplay measures loading: path=machine replays records held in memory into the state
// machine (decode, lookup, merge); path=log adds reading them back from a statelog on disk.
func BenchmarkReplay(b *testing.B) {
	for _, tc := range []struct{ keys, updates int }{{10000, 200}, {100000, 20}} {
		corpus := buildCorpus(tc.keys, tc.updates)
		n := len(corpus.ends)
		b.Run(fmt.Sprintf("keys=%d/path=machine", tc.keys), func(b *testing.B) {
			b.SetBytes(int64(len(corpus.buf)))
			b.ReportAllocs()
			start := time.Now()
			iters := 0
			for b.Loop() {
				m := newMachine(zap.NewNop(), fixedLimit(1000), time.Now, 0, 0)
				for i := 0; i < n; i++ {
					if err := m.replayRaw(int64(i), corpus.record(i)); err != nil {
						b.Fatal(err)
					}
				}
				iters++
			}
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(n*iters)/secs, "records/s")
			b.ReportMetric(float64(corpus.updates*iters)/secs, "updates/s")
		})
		b.Run(fmt.Sprintf("keys=%d/path=log", tc.keys), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "log")
			l, err := statelog.Open(zap.NewNop(), dir, statelog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var recs [][]byte
			for i := 0; i < n; i++ {
				recs = append(recs, corpus.record(i))
				if len(recs) == 4096 || i == n-1 {
					if _, err := l.Append(recs); err != nil {
						b.Fatal(err)
					}
					recs = recs[:0]
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(corpus.buf)))
			b.ReportAllocs()
			start := time.Now()
			iters := 0
			for b.Loop() {
				l, err := statelog.Open(zap.NewNop(), dir, statelog.Options{ReadBufferBytes: 5 << 20})
				if err != nil {
					b.Fatal(err)
				}
				m := newMachine(zap.NewNop(), fixedLimit(1000), time.Now, 0, 0)
				if err := l.Replay(l.StartOffset(), m.replayRaw); err != nil {
					b.Fatal(err)
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				iters++
			}
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(n*iters)/secs, "records/s")
			b.ReportMetric(float64(corpus.updates*iters)/secs, "updates/s")
		})
	}
}

// BenchmarkMemoryPerKey measures the resident memory of a key holding about 100 state batches,
// reached through replayed updates, against the size of that key's encoded snapshot record.
func BenchmarkMemoryPerKey(b *testing.B) {
	const nKeys = 20000
	b.Run("batches=100", func(b *testing.B) {
		corpus := buildCorpusWindow(nKeys, 10, 100)
		b.ReportAllocs()
		var perKey, snap, batches float64
		for b.Loop() {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m := newMachine(zap.NewNop(), fixedLimit(1000), time.Now, 0, 0)
			for i := range corpus.ends {
				if err := m.replayRaw(int64(i), corpus.record(i)); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			total, nb := 0, 0
			for _, e := range m.states {
				total += record.SnapshotSize(e.key, len(e.batches), e.dcc)
				nb += len(e.batches)
			}
			perKey = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / nKeys
			snap = float64(total) / nKeys
			batches = float64(nb) / nKeys
			runtime.KeepAlive(m)
		}
		runtime.KeepAlive(corpus)
		b.ReportMetric(perKey, "resident-B/key")
		b.ReportMetric(snap, "snapshot-B/key")
		b.ReportMetric(batches, "batches/key")
		b.ReportMetric(perKey/snap, "resident/snapshot")
	})
}

// BenchmarkShardWrites measures durable writes per second on a real disk with concurrent submitters
// sharing fsyncs through group commit (adaptive linger).
func BenchmarkShardWrites(b *testing.B) {
	for _, submitters := range []int{1, 8, 64, 256} {
		b.Run(fmt.Sprintf("submitters=%d", submitters), func(b *testing.B) {
			s := openLocal(zap.NewNop(), fixedLimit(500), testOpts{LogDir: b.TempDir(), Options: Options{AppendLingerMs: -1, WriteTimeout: time.Minute}})
			defer s.Close()
			ctx := context.Background()
			if err := s.WaitLoaded(ctx); err != nil {
				b.Fatal(err)
			}
			keys := make([]Key, submitters)
			for i := range keys {
				keys[i] = Key{GroupID: "bench", TopicID: testTopic, Partition: int32(i)}
				if r := s.Initialize(ctx, InitializeRequest{Key: keys[i], StateEpoch: 1, StartOffset: 0}); r.Code != kafkaerr.None {
					b.Fatal(r)
				}
			}
			commits := s.Stats().Commits
			b.ReportAllocs()
			var next atomic.Int64
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := 0; w < submitters; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for j := next.Add(1); j <= int64(b.N); j = next.Add(1) {
						req := WriteRequest{Key: keys[w], StateEpoch: 1, StartOffset: j, DeliveryCompleteCount: 1,
							StateBatches: []StateBatch{{FirstOffset: j, LastOffset: j + 9, DeliveryState: 2, DeliveryCount: 1}}}
						if r := s.Write(ctx, req); r.Code != kafkaerr.None {
							b.Error(r)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			b.StopTimer()
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/secs, "writes/s")
			b.ReportMetric(float64(b.N)/float64(max(s.Stats().Commits-commits, 1)), "writes/fsync")
		})
	}
}

// BenchmarkColdJobStall measures what a cold-partition snapshot job over a state partition of many
// keys costs the writes that arrive while it runs: the job's duration, and the worst latency of a
// write of one writer on random keys, which starts 20 ms before the job and stops after it. Each
// iteration is one job over every key.
func BenchmarkColdJobStall(b *testing.B) {
	for _, nKeys := range []int{100_000} {
		b.Run(fmt.Sprintf("keys=%d/batches=10", nKeys), func(b *testing.B) {
			dataDir := b.TempDir()
			l, err := statelog.Open(zap.NewNop(), dataDir, statelog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			g := newWindowGen(nKeys, 10)
			var recs [][]byte
			for i := range g.keys {
				recs = append(recs, g.snapshot(nil, i))
				if len(recs) == 4096 || i == len(g.keys)-1 {
					if _, err := l.Append(recs); err != nil {
						b.Fatal(err)
					}
					recs = recs[:0]
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			s := openLocal(zap.NewNop(), fixedLimit(500), testOpts{LogDir: dataDir, Options: Options{WriteTimeout: time.Minute}})
			defer s.Close()
			ctx := context.Background()
			if err := s.WaitLoaded(ctx); err != nil {
				b.Fatal(err)
			}
			var worst, jobs time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A key that is not a cold copy, so that the job does not find the partition quiet.
				fresh := Key{GroupID: "fresh", TopicID: testTopic, Partition: int32(i)}
				if r := s.Initialize(ctx, InitializeRequest{Key: fresh, StateEpoch: 1}); r.Code != kafkaerr.None {
					b.Fatal(r)
				}
				stop, writing := make(chan struct{}), make(chan struct{})
				wrote := sync.OnceFunc(func() { close(writing) })
				var wg sync.WaitGroup
				var maxWrite time.Duration
				wg.Go(func() {
					defer wrote() // also when the first write fails
					r := rand.New(rand.NewPCG(uint64(i), 2))
					for off := int64(2000); ; off++ {
						select {
						case <-stop:
							return
						default:
						}
						k := r.IntN(nKeys)
						req := WriteRequest{Key: Key{GroupID: fmt.Sprintf("group-%d", k%50), TopicID: testTopic, Partition: int32(k)},
							StateEpoch: 1, StartOffset: -1, StateBatches: []StateBatch{{FirstOffset: off, LastOffset: off, DeliveryState: 2, DeliveryCount: 1}}}
						began := time.Now()
						if res := s.Write(ctx, req); res.Code != kafkaerr.None {
							b.Error(res)
							return
						}
						maxWrite = max(maxWrite, time.Since(began))
						wrote()
					}
				})
				<-writing // the writer is under way: its first write was answered
				began := time.Now()
				if _, err := s.SnapshotColdPartitions(ctx); err != nil {
					b.Fatal(err)
				}
				jobs += time.Since(began)
				close(stop)
				wg.Wait()
				worst = max(worst, maxWrite)
			}
			b.StopTimer()
			b.ReportMetric(float64(jobs.Milliseconds())/float64(b.N), "job-ms")
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-write-ms")
		})
	}
}
