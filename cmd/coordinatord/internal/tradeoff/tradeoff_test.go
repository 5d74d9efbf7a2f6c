package tradeoff

import (
	"bytes"
	"context"
	"encoding/csv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func validConfig(t *testing.T) Config {
	return Config{
		Shape:        workload.Shape{GroupID: "g", SharePartitions: 4, StateBatches: 6, BatchesPerWrite: 2},
		Limits:       []int{200},
		Cold:         []bool{false},
		Concurrency:  4,
		DataDir:      t.TempDir(),
		SegmentBytes: 4 << 10,
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "validator bounds", mutate: func(c *Config) { c.Limits = []int{200, 1000} }},
		{name: "below the validator", mutate: func(c *Config) { c.Limits = []int{100} }, wantErr: "--allow-out-of-range-limits"},
		{name: "above the validator", mutate: func(c *Config) { c.Limits = []int{2000} }, wantErr: "outside the validator's range [200, 1000]"},
		{name: "out of range allowed", mutate: func(c *Config) { c.Limits = []int{0, 50000}; c.AllowOutOfRange = true }},
		{name: "negative limit", mutate: func(c *Config) { c.Limits = []int{-1}; c.AllowOutOfRange = true }, wantErr: "limit -1"},
		{name: "duplicate limit", mutate: func(c *Config) { c.Limits = []int{500, 500} }, wantErr: "listed once"},
		{name: "no limits", mutate: func(c *Config) { c.Limits = nil }, wantErr: "at least one"},
		{name: "no cold mode", mutate: func(c *Config) { c.Cold = nil }, wantErr: "cold-partition snapshot modes"},
		{name: "cold without interval", mutate: func(c *Config) { c.Cold = []bool{true} }, wantErr: "cold interval"},
		{name: "bad shape", mutate: func(c *Config) { c.Shape.SharePartitions = 0 }, wantErr: "share partitions 0"},
		{name: "negative idle", mutate: func(c *Config) { c.IdleSharePartitions = -1 }, wantErr: "idle share partitions -1"},
		{name: "no concurrency", mutate: func(c *Config) { c.Concurrency = 0 }, wantErr: "concurrency 0"},
		{name: "negative rate", mutate: func(c *Config) { c.Rate = -1 }, wantErr: "rate -1"},
		{name: "writes and duration", mutate: func(c *Config) { c.Writes, c.Duration = 10, time.Second }, wantErr: "not both"},
		{name: "no data dir", mutate: func(c *Config) { c.DataDir = "" }, wantErr: "data dir"},
		{name: "tiny segments", mutate: func(c *Config) { c.SegmentBytes = 10 }, wantErr: "segment bytes 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}

func TestSLOCeiling(t *testing.T) {
	row := func(limit int, cold bool, replay, growth float64) Row {
		// GrowthBytesPerSecond = (update + snapshot bytes) / seconds.
		return Row{Limit: limit, Cold: cold, ReplaySeconds: replay, Seconds: 1, Writes: 1, UpdateBytes: int64(growth)}
	}
	rows := []Row{
		row(200, false, 0.1, 900), row(1000, false, 0.4, 500), row(5000, false, 1.5, 300), row(10000, false, 3, 250),
		row(200, true, 0.1, 950), row(1000, true, 0.2, 600), row(5000, true, 0.3, 550),
	}
	tests := []struct {
		name   string
		slo    SLO
		cold   bool
		want   int
		wantOK bool
	}{
		{name: "replay only", slo: SLO{MaxReplaySeconds: 1}, want: 1000, wantOK: true},
		{name: "both", slo: SLO{MaxReplaySeconds: 2, MaxGrowthPerSecond: 400}, want: 5000, wantOK: true},
		{name: "growth excludes the small limits", slo: SLO{MaxReplaySeconds: 0.5, MaxGrowthPerSecond: 400}, wantOK: false},
		{name: "no objective", slo: SLO{}, want: 10000, wantOK: true},
		{name: "cold mode", slo: SLO{MaxReplaySeconds: 1, MaxGrowthPerSecond: 600}, cold: true, want: 5000, wantOK: true},
		{name: "bound is inclusive", slo: SLO{MaxReplaySeconds: 0.4}, want: 1000, wantOK: true},
		// At 2 writes/s a run grows by twice its bytes per write: 1800, 1000, 600 and 500 B/s off.
		{name: "growth at a write rate", slo: SLO{MaxGrowthPerSecond: 1000, MaxReplaySeconds: 2, WriteRate: 2}, want: 5000, wantOK: true},
		{name: "growth at a write rate excludes", slo: SLO{MaxGrowthPerSecond: 1000, MaxReplaySeconds: 0.2, WriteRate: 2}, wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.slo.Ceiling(rows, tc.cold)
			if ok != tc.wantOK || (ok && got != tc.want) {
				t.Fatalf("Ceiling = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	var out bytes.Buffer
	if err := (SLO{MaxReplaySeconds: 1}).WriteVerdict(&out, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"largest limit meeting both (cold snapshots off): 1000", "largest limit meeting both (cold snapshots on): 5000", "| 5000 | 1.50s |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verdict lacks %q:\n%s", want, out.String())
		}
	}
}

func TestQuantiles(t *testing.T) {
	ws := []weighted{{v: 5, n: 1}, {v: 1, n: 98}, {v: 100, n: 1}}
	p50, p99, mx := quantiles(ws, 100)
	if p50 != 1 || p99 != 5 || mx != 100 {
		t.Fatalf("quantiles = %v, %v, %v; want 1, 5, 100", p50, p99, mx)
	}
	if a, b, c := quantiles(nil, 0); a != 0 || b != 0 || c != 0 {
		t.Fatal("no samples: want zeros")
	}
}

func TestTimeline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var tl timeline
	tl.add(t0, 0)
	tl.add(t0.Add(time.Second), 100)
	tl.add(t0.Add(2*time.Second), 90) // end offsets never go back
	tl.add(t0.Add(3*time.Second), 300)
	tests := []struct {
		x    int64
		want time.Duration
	}{{-5, 0}, {0, 0}, {50, 500 * time.Millisecond}, {100, 2 * time.Second}, {200, 2500 * time.Millisecond}, {999, 3 * time.Second}}
	for _, tc := range tests {
		if got := tl.timeOf(tc.x).Sub(t0); got != tc.want {
			t.Errorf("timeOf(%d) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

// refLag is a brute-force reference of the pruning lag: for every record, the offset of its share
// partition's next snapshot and the first offset after which every share partition's latest
// snapshot is at or past the end of the record's segment.
func refLag(keys []int, snap []bool, bases []int64) map[int64]int64 {
	n := int64(len(keys))
	segEnd := func(o int64) int64 {
		for i := len(bases) - 1; i >= 0; i-- {
			if bases[i] <= o {
				if i+1 < len(bases) {
					return bases[i+1]
				}
				return -1 // the active segment
			}
		}
		return -1
	}
	lroAfter := func(x int64) int64 {
		last := map[int]int64{}
		for o := int64(0); o <= x; o++ {
			if snap[o] {
				last[keys[o]] = o
			}
		}
		lro := int64(-1)
		for _, v := range last {
			if lro < 0 || v < lro {
				lro = v
			}
		}
		return lro
	}
	out := map[int64]int64{} // supersede offset-keyed multiset flattened: record offset → lag
	for o := int64(0); o < n; o++ {
		s := int64(-1)
		for x := o + 1; x < n; x++ {
			if keys[x] == keys[o] && snap[x] {
				s = x
				break
			}
		}
		end := segEnd(o)
		if s < 0 || end < 0 {
			continue
		}
		for x := s; x < n; x++ {
			if lroAfter(x) >= end {
				out[o] = x - s
				break
			}
		}
	}
	return out
}

func TestAnalyzeLogMatchesReference(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		dir := filepath.Join(t.TempDir(), "log")
		l, err := statelog.Open(zaptest.NewLogger(t), dir, statelog.Options{SegmentBytes: 2 << 10})
		if err != nil {
			t.Fatal(err)
		}
		const n = 400
		var keys []int
		var snap []bool
		for o := 0; o < n; o++ {
			k := r.IntN(3)
			isSnap := o < 3 || r.IntN(8) == 0
			if o < 3 {
				k = o // every share partition starts with a snapshot
			}
			key := record.Key{GroupID: "g", TopicID: workload.DefaultTopic, Partition: int32(k)}
			rec := record.Record{Type: record.TypeUpdate, Key: key, Update: &record.UpdateValue{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}}
			if isSnap {
				rec = record.Record{Type: record.TypeSnapshot, Key: key, Snapshot: &record.SnapshotValue{DeliveryCompleteCount: -1}}
			}
			b, err := record.Encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append([][]byte{b}); err != nil {
				t.Fatal(err)
			}
			keys, snap = append(keys, k), append(snap, isSnap)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		var bases []int64
		segs, err := datadir.SegmentFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range segs {
			first := true
			if err := statelog.Scan(nil, seg, statelog.Options{}, func(off int64, _ []byte) error {
				if first {
					bases, first = append(bases, off), false
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(bases)
		if len(bases) < 3 {
			t.Fatalf("want several segments, got %d", len(bases))
		}
		var tl timeline
		t0 := time.Unix(0, 0)
		tl.add(t0, 0)
		tl.add(t0.Add(n*time.Millisecond), n)

		got, lro, err := analyzeLog(zaptest.NewLogger(t), dir, 0, n, n, &tl)
		if err != nil {
			t.Fatal(err)
		}
		ref := refLag(keys, snap, bases)
		var lags []float64
		for _, v := range ref {
			lags = append(lags, float64(v))
		}
		slices.Sort(lags)
		superseded := int64(0)
		for o := 0; o < n; o++ {
			for x := o + 1; x < n; x++ {
				if keys[x] == keys[o] && snap[x] {
					superseded++
					break
				}
			}
		}
		if got.Superseded != superseded || got.Superseded-got.Pinned != int64(len(ref)) {
			t.Fatalf("seed %d: superseded %d (pinned %d), want %d with %d deletable", seed, got.Superseded, got.Pinned, superseded, len(ref))
		}
		if len(lags) > 0 {
			if got.OffsetsMax != lags[len(lags)-1] {
				t.Fatalf("seed %d: max lag %v, want %v", seed, got.OffsetsMax, lags[len(lags)-1])
			}
			if want := lags[(len(lags)+1)/2-1]; got.OffsetsP50 != want {
				t.Fatalf("seed %d: p50 lag %v, want %v", seed, got.OffsetsP50, want)
			}
			if d := got.SecondsMax - got.OffsetsMax/1000; d < -1e-9 || d > 1e-9 {
				t.Fatalf("seed %d: max lag %vs, want %vs (1 ms per offset)", seed, got.SecondsMax, got.OffsetsMax/1000)
			}
		}
		last := map[int]int64{}
		for o := 0; o < n; o++ {
			if snap[o] {
				last[keys[o]] = int64(o)
			}
		}
		wantLRO := int64(n)
		for _, v := range last {
			wantLRO = min(wantLRO, v)
		}
		if lro != wantLRO {
			t.Fatalf("seed %d: last redundant offset %d, want %d", seed, lro, wantLRO)
		}
	}
}

func TestRunSmoke(t *testing.T) {
	cfg := validConfig(t)
	cfg.Limits = []int{3, 10}
	cfg.AllowOutOfRange = true
	cfg.Cold = []bool{false, true}
	cfg.ColdInterval = time.Millisecond
	cfg.IdleSharePartitions = 1
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := Run(ctx, zaptest.NewLogger(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("want 4 rows (2 limits × 2 modes), got %d", len(rows))
	}
	for _, r := range rows {
		if want := cfg.measuredWrites(r.Limit); r.Writes != want {
			t.Errorf("limit %d: measured %d writes, want %d", r.Limit, r.Writes, want)
		}
		// Stagger (⌊i·limit/N⌋ each), limit+1 rounds and one write per idle share partition; the
		// cold-partition snapshots taken meanwhile are no writes.
		want := int64((r.Limit+1)*cfg.Shape.SharePartitions + cfg.IdleSharePartitions)
		for i := 0; i < cfg.Shape.SharePartitions; i++ {
			want += int64(i * r.Limit / cfg.Shape.SharePartitions)
		}
		if r.WarmupWrites != want {
			t.Errorf("limit %d cold %v: %d warm-up writes, want %d", r.Limit, r.Cold, r.WarmupWrites, want)
		}
		if r.UpdateRecords == 0 || r.SnapshotRecords == 0 || r.ReplaySeconds <= 0 || r.RetainedBytes <= 0 {
			t.Errorf("limit %d cold %v: implausible row %+v", r.Limit, r.Cold, r)
		}
		if r.ReplayedKeys != int64(cfg.Shape.SharePartitions+cfg.IdleSharePartitions) {
			t.Errorf("limit %d: replayed %d share partitions, want %d", r.Limit, r.ReplayedKeys, cfg.Shape.SharePartitions+1)
		}
		if !r.Cold && r.Lag.Pinned != r.Lag.Superseded {
			t.Errorf("limit %d: without cold snapshots the idle share partition pins every segment, got %+v", r.Limit, r.Lag)
		}
		if r.Lag.Superseded == 0 {
			t.Errorf("limit %d cold %v: nothing superseded", r.Limit, r.Cold)
		}
	}
	if a, b := rows[0].WriteAmplification(), rows[2].WriteAmplification(); !(a > b) {
		t.Errorf("want more write amplification at limit 3 than at 10 without cold snapshots, got %v and %v", a, b)
	}
	entries, err := os.ReadDir(cfg.DataDir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("want the run directories removed, got %v %v", entries, err)
	}

	var c bytes.Buffer
	if err := WriteCSV(&c, rows); err != nil {
		t.Fatal(err)
	}
	raw := append([]byte(nil), c.Bytes()...)
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil || len(recs) != 5 || len(recs[0]) != len(csvHeader) || recs[1][0] != "3" || recs[1][1] != "off" {
		t.Fatalf("CSV: %v %v", recs, err)
	}
	back, err := ReadCSV(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rows) {
		t.Fatalf("read back %d rows, want %d", len(back), len(rows))
	}
	for i := range rows {
		a, b := rows[i], back[i]
		if a.Limit != b.Limit || a.Cold != b.Cold || a.Writes != b.Writes || a.UpdateBytes != b.UpdateBytes ||
			a.RetainedRecords != b.RetainedRecords || a.Lag.Superseded != b.Lag.Superseded ||
			math.Abs(a.ReplaySeconds-b.ReplaySeconds) > 1e-5*a.ReplaySeconds || a.Commits != b.Commits {
			t.Fatalf("row %d read back as %+v, want %+v", i, b, a)
		}
	}
	if _, err := ReadCSV(strings.NewReader("limit,nope\n1,2\n")); err == nil {
		t.Fatal("a foreign header: want an error")
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 10 | on |") || !strings.Contains(md.String(), "Pruning lag") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	writesPNGs(t, rows)
}

func TestRunHonoursCancellation(t *testing.T) {
	cfg := validConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, zaptest.NewLogger(t), cfg); err == nil {
		t.Fatal("want the cancellation reported")
	}
}

// The CSV carries every figure the Markdown table shows, digit for digit: a study reported again
// from its CSV (--from-csv) prints the same tables as the run that measured it.
func TestCSVKeepsTheMarkdownFigures(t *testing.T) {
	rows := []Row{{
		Limit: 10000, Cold: true, WarmupWrites: 1495145, Writes: 1000100, Seconds: 5.561434217, Commits: 31659,
		UpdateRecords: 1000001, SnapshotRecords: 120, UpdateBytes: 107000107, SnapshotBytes: 125640,
		RetainedBytes: 115272043, RetainedRecords: 995010, ReplaySeconds: 0.100706123, ReplayedKeys: 105,
		Lag: LagStats{Superseded: 990120, OffsetsP50: 525569, OffsetsP99: 1029897, OffsetsMax: 1070861,
			SecondsP50: 3.03899, SecondsP99: 6.13112, SecondsMax: 6.51587},
	}}
	var c, want, got bytes.Buffer
	if err := WriteCSV(&c, rows); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCSV(&c)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&want, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&got, back); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("the Markdown of the CSV read back differs:\n%s\nwant:\n%s", got.String(), want.String())
	}
	if back[0].Commits != rows[0].Commits {
		t.Fatalf("commits read back as %d, want %d", back[0].Commits, rows[0].Commits)
	}
}

// A CSV with a header and no run is refused rather than reported as an empty study.
func TestReadCSVWithoutRows(t *testing.T) {
	var c bytes.Buffer
	if err := WriteCSV(&c, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCSV(&c); err == nil || !strings.Contains(err.Error(), "no run") {
		t.Fatalf("want an error naming the missing runs, got %v", err)
	}
}

// At limit 0 every write is a snapshot: with no update bytes the amplification is unbounded, not 0.
func TestWriteAmplificationWithoutUpdates(t *testing.T) {
	if got := (Row{SnapshotBytes: 167000}).WriteAmplification(); !math.IsInf(got, 1) {
		t.Fatalf("write amplification with snapshots only = %v, want +Inf", got)
	}
	if got := (Row{}).WriteAmplification(); got != 0 {
		t.Fatalf("write amplification of nothing written = %v, want 0", got)
	}
}

// A run whose superseded records all stayed pinned has no measured lag: the tables must not print
// it as a lag of 0, nor the plot draw it at 0.
func TestPinnedRunHasNoLagFigure(t *testing.T) {
	rows := []Row{
		{Limit: 1000, Lag: LagStats{Superseded: 100, Pinned: 100, PinnedSecondsMax: 1.8}},
		{Limit: 10000, Lag: LagStats{Superseded: 100, SecondsP99: 6.1, OffsetsP99: 1000}},
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if want := "| 1000 | off | 100 | 100.0% | – | – | – | – | – | – | ≥ 1.80s |"; !strings.Contains(md.String(), want) {
		t.Fatalf("markdown lacks %q:\n%s", want, md.String())
	}
	ss := curves(rows, lagP99)
	if len(ss) != 1 || len(ss[0].xys) != 1 || ss[0].xys[0].X != 10000 {
		t.Fatalf("lag curve %+v: want only the run at limit 10000", ss)
	}
}

// Plots of a study without a positive limit (limit 0 cannot be placed on the log scale), or whose
// every run stayed pinned, are written empty rather than panicking.
func TestPlotsWithoutPoints(t *testing.T) {
	rows := []Row{{Limit: 0, Writes: 1000, Seconds: 1, SnapshotBytes: 1000, ReplaySeconds: 0.001}}
	writesPNGs(t, rows)
}

// When the largest limit studied meets the objectives, the ceiling may lie beyond it: the verdict
// says so instead of presenting it as the largest limit meeting them.
func TestVerdictWhenTheLargestLimitMeets(t *testing.T) {
	rows := []Row{{Limit: 200, ReplaySeconds: 0.1}, {Limit: 1000, ReplaySeconds: 0.2}}
	var out bytes.Buffer
	if err := (SLO{MaxReplaySeconds: 1}).WriteVerdict(&out, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "largest limit meeting both (cold snapshots off): 1000") || !strings.Contains(out.String(), "the largest limit studied") {
		t.Fatalf("verdict:\n%s", out.String())
	}
	out.Reset()
	if err := (SLO{MaxReplaySeconds: 0.15}).WriteVerdict(&out, rows); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "the largest limit studied") {
		t.Fatalf("verdict with a limit failing:\n%s", out.String())
	}
}

// TestVerdictNamesSmallerLimitsThatMiss: when a noisy run makes a limit under the ceiling miss an
// objective, the verdict says which, instead of presenting the ceiling as a clean cut-off.
func TestVerdictNamesSmallerLimitsThatMiss(t *testing.T) {
	rows := []Row{{Limit: 200, ReplaySeconds: 0.1}, {Limit: 500, ReplaySeconds: 0.3}, {Limit: 1000, ReplaySeconds: 0.2}, {Limit: 2000, ReplaySeconds: 0.4}}
	var out bytes.Buffer
	if err := (SLO{MaxReplaySeconds: 0.25}).WriteVerdict(&out, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "largest limit meeting both (cold snapshots off): 1000") ||
		!strings.Contains(out.String(), "smaller limits miss: 500;") {
		t.Fatalf("verdict:\n%s", out.String())
	}
	out.Reset()
	if err := (SLO{MaxReplaySeconds: 0.35}).WriteVerdict(&out, rows); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "smaller limits miss") {
		t.Fatalf("verdict of a monotone curve:\n%s", out.String())
	}
}

// writesPNGs checks that WritePlots writes the three plots of rows as PNG files.
func writesPNGs(t *testing.T, rows []Row) {
	t.Helper()
	out := t.TempDir()
	if err := WritePlots(out, rows, SLO{MaxReplaySeconds: 1, MaxGrowthPerSecond: 1 << 20}, 1000, "test"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ReplayPlot, GrowthPlot, LagPlot} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("%s is not a PNG: %v", name, err)
		}
	}
}
