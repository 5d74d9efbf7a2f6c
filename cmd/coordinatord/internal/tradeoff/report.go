package tradeoff

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// csvHeader names the CSV columns, in order.
var csvHeader = []string{
	"limit", "cold_snapshots", "warmup_writes", "writes", "seconds", "writes_per_second", "writes_per_commit",
	"update_records", "snapshot_records", "update_bytes", "snapshot_bytes",
	"log_growth_bytes_per_second", "log_growth_bytes_per_write", "write_amplification",
	"retained_bytes", "retained_records", "replay_seconds", "replayed_share_partitions",
	"lag_superseded_records", "lag_pinned_records",
	"lag_offsets_p50", "lag_offsets_p99", "lag_offsets_max",
	"lag_seconds_p50", "lag_seconds_p99", "lag_seconds_max", "lag_pinned_seconds_max",
}

// WriteCSV writes one header line and one line per row.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	// The shortest representation that reads back exactly: the CSV carries every digit the
	// Markdown tables print (lag offsets run to millions), so that --from-csv reports the same.
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, r := range rows {
		l := r.Lag
		rec := []string{
			strconv.Itoa(r.Limit), Mode(r.Cold), i(r.WarmupWrites), i(r.Writes), f(r.Seconds), f(r.WritesPerSecond()),
			f(div(float64(r.Writes), float64(r.Commits))),
			i(r.UpdateRecords), i(r.SnapshotRecords), i(r.UpdateBytes), i(r.SnapshotBytes),
			f(r.GrowthBytesPerSecond()), f(r.GrowthBytesPerWrite()), f(r.WriteAmplification()),
			i(r.RetainedBytes), i(r.RetainedRecords), f(r.ReplaySeconds), i(r.ReplayedKeys),
			i(l.Superseded), i(l.Pinned),
			f(l.OffsetsP50), f(l.OffsetsP99), f(l.OffsetsMax),
			f(l.SecondsP50), f(l.SecondsP99), f(l.SecondsMax), f(l.PinnedSecondsMax),
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes the rows as two Markdown tables: the sustained-write figures and the
// pruning lag.
func WriteMarkdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("Sustained write (scenario 1):\n\n")
	b.WriteString("| limit | cold snapshots | writes/s | log growth | B/write | write amplification | retained log | retained records | replay |\n")
	b.WriteString("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %s/s | %.1f | %.4f | %s | %d | %s |\n",
			r.Limit, Mode(r.Cold), r.WritesPerSecond(), Bytes(r.GrowthBytesPerSecond()), r.GrowthBytesPerWrite(),
			r.WriteAmplification(), Bytes(float64(r.RetainedBytes)), r.RetainedRecords, Seconds(r.ReplaySeconds))
	}
	b.WriteString("\nPruning lag (scenario 2), superseded record → its segment deletable:\n\n")
	b.WriteString("| limit | cold snapshots | superseded | pinned | p50 offsets | p99 offsets | max offsets | p50 | p99 | max | pinned for |\n")
	b.WriteString("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		l := r.Lag
		pinnedFor := "–"
		if l.Pinned > 0 {
			pinnedFor = "≥ " + Seconds(l.PinnedSecondsMax)
		}
		// The quantiles are over the records whose segment became deletable: with none, there is
		// no lag to print (not a lag of 0).
		offs, secs := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }, Seconds
		if l.Superseded == l.Pinned {
			offs, secs = func(float64) string { return "–" }, func(float64) string { return "–" }
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Limit, Mode(r.Cold), l.Superseded, percent(l.Pinned, l.Superseded),
			offs(l.OffsetsP50), offs(l.OffsetsP99), offs(l.OffsetsMax), secs(l.SecondsP50), secs(l.SecondsP99), secs(l.SecondsMax), pinnedFor)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func percent(part, whole int64) string {
	if whole == 0 {
		return "0"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

// Bytes renders a byte count with binary units ("512 B", "3.2 KiB", "1.50 MiB", "2.00 GiB").
func Bytes(v float64) string {
	switch {
	case v < 1<<10:
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	case v < 1<<20:
		return strconv.FormatFloat(v/(1<<10), 'f', 1, 64) + " KiB"
	case v < 1<<30:
		return strconv.FormatFloat(v/(1<<20), 'f', 2, 64) + " MiB"
	default:
		return strconv.FormatFloat(v/(1<<30), 'f', 2, 64) + " GiB"
	}
}

// Seconds renders a duration in seconds with units suited to its size ("850µs", "12.3ms", "4.56s").
func Seconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1e-3:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(s, 'f', 2, 64) + "s"
	}
}

// ReadCSV reads rows written by WriteCSV, so that a measured study can be reported again (other
// SLOs, other plots) without running it again. Derived columns are not read back: they are
// recomputed from the counts.
func ReadCSV(r io.Reader) ([]Row, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read CSV: %w", err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], csvHeader) {
		return nil, errors.New("read CSV: the header is not the one snapshot-tradeoff writes")
	}
	col := map[string]int{}
	for i, name := range csvHeader {
		col[name] = i
	}
	if len(recs) == 1 {
		return nil, errors.New("read CSV: no run after the header")
	}
	var rows []Row
	for n, rec := range recs[1:] {
		var errs []error
		i := func(name string) int64 {
			v, err := strconv.ParseInt(rec[col[name]], 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			return v
		}
		f := func(name string) float64 {
			v, err := strconv.ParseFloat(rec[col[name]], 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			return v
		}
		row := Row{
			Limit: int(i("limit")), WarmupWrites: i("warmup_writes"), Writes: i("writes"), Seconds: f("seconds"),
			UpdateRecords: i("update_records"), SnapshotRecords: i("snapshot_records"),
			UpdateBytes: i("update_bytes"), SnapshotBytes: i("snapshot_bytes"),
			RetainedBytes: i("retained_bytes"), RetainedRecords: i("retained_records"),
			ReplaySeconds: f("replay_seconds"), ReplayedKeys: i("replayed_share_partitions"),
			Lag: LagStats{
				Superseded: i("lag_superseded_records"), Pinned: i("lag_pinned_records"),
				OffsetsP50: f("lag_offsets_p50"), OffsetsP99: f("lag_offsets_p99"), OffsetsMax: f("lag_offsets_max"),
				SecondsP50: f("lag_seconds_p50"), SecondsP99: f("lag_seconds_p99"), SecondsMax: f("lag_seconds_max"),
				PinnedSecondsMax: f("lag_pinned_seconds_max"),
			},
		}
		switch rec[col["cold_snapshots"]] {
		case "on":
			row.Cold = true
		case "off":
		default:
			errs = append(errs, fmt.Errorf("cold_snapshots %q: want on or off", rec[col["cold_snapshots"]]))
		}
		if wpc := f("writes_per_commit"); wpc > 0 {
			row.Commits = int64(math.Round(float64(row.Writes) / wpc))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("read CSV line %d: %w", n+2, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}
