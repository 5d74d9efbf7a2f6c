package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/latency"
)

// WriteMarkdown renders the report as a Markdown table, one row per phase, followed by the
// write ÷ health ratios when both phases ran and by the failure causes when there were any.
func (r *Report) WriteMarkdown(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "target %s, %d in flight over %d connection(s), %d share partitions, %d state batches per write, %v recorded after %v warm-up per phase\n\n",
		c.Target, c.Concurrency, c.Connections, c.Keys, c.BatchesPerWrite, c.Duration, c.Warmup)
	b.WriteString("| phase | calls | errors | calls/s | p50 | p90 | p99 | p99.9 | max |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Phases {
		l := p.Latency
		lat := func(d time.Duration) string {
			if l.Count == 0 {
				return "–" // no successful call: no latency, not a latency of 0
			}
			return latency.Format(d)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %s | %s | %s | %s | %s |\n", p.Kind, p.Calls, p.Errors, p.Throughput(),
			lat(l.P50), lat(l.P90), lat(l.P99), lat(l.P999), lat(l.Max))
	}
	if q, ok := r.Ratios(); ok {
		fmt.Fprintf(&b, "| write ÷ health | | | %.3f | %.2f | %.2f | %.2f | %.2f | |\n", q.Throughput, q.P50, q.P90, q.P99, q.P999)
	}
	for _, p := range r.Phases {
		switch {
		case p.Elapsed <= 0:
			fmt.Fprintf(&b, "\n%s was interrupted in its warm-up: nothing was recorded\n", p.Kind)
		case p.Elapsed != c.Duration:
			fmt.Fprintf(&b, "\n%s was interrupted after %v of its %v recorded window; its row covers that time only\n",
				p.Kind, p.Elapsed.Round(time.Millisecond), c.Duration)
		}
	}
	for _, p := range r.Phases {
		if p.Errors > 0 {
			b.WriteString("\ncalls and errors count every call of the recorded window; calls/s and the latencies only the successful ones\n")
			break
		}
	}
	for _, p := range r.Phases {
		if len(p.ErrorCauses) == 0 {
			continue
		}
		causes := make([]string, 0, len(p.ErrorCauses))
		for cause := range p.ErrorCauses {
			causes = append(causes, cause)
		}
		sort.Strings(causes)
		fmt.Fprintf(&b, "\n%s failures:", p.Kind)
		for _, cause := range causes {
			fmt.Fprintf(&b, " %s=%d", cause, p.ErrorCauses[cause])
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonPhase is a phase in the JSON report; durations are in seconds.
type jsonPhase struct {
	Kind          Kind             `json:"kind"`
	Calls         int64            `json:"calls"`
	Errors        int64            `json:"errors"`
	ErrorCauses   map[string]int64 `json:"error_causes,omitempty"`
	ElapsedSec    float64          `json:"elapsed_seconds"`
	CallsPerSec   float64          `json:"calls_per_second"`
	LatencySecond jsonLatency      `json:"latency_seconds"`
}

type jsonLatency struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

type jsonReport struct {
	Target          string      `json:"target"`
	Connections     int         `json:"connections"`
	Concurrency     int         `json:"concurrency"`
	Keys            int         `json:"keys"`
	BatchesPerWrite int         `json:"batches_per_write"`
	DurationSec     float64     `json:"duration_seconds"`
	WarmupSec       float64     `json:"warmup_seconds"`
	Phases          []jsonPhase `json:"phases"`
	Ratios          *Ratios     `json:"write_to_health,omitempty"`
}

// WriteJSON renders the report as one JSON object (durations in seconds).
func (r *Report) WriteJSON(w io.Writer) error {
	c := r.Config
	out := jsonReport{
		Target: c.Target, Connections: c.Connections, Concurrency: c.Concurrency, Keys: c.Keys,
		BatchesPerWrite: c.BatchesPerWrite, DurationSec: c.Duration.Seconds(), WarmupSec: c.Warmup.Seconds(),
	}
	sec := func(d time.Duration) float64 { return d.Seconds() }
	for _, p := range r.Phases {
		l := p.Latency
		out.Phases = append(out.Phases, jsonPhase{
			Kind: p.Kind, Calls: p.Calls, Errors: p.Errors, ErrorCauses: p.ErrorCauses,
			ElapsedSec: sec(p.Elapsed), CallsPerSec: p.Throughput(),
			LatencySecond: jsonLatency{sec(l.Min), sec(l.Mean), sec(l.P50), sec(l.P90), sec(l.P99), sec(l.P999), sec(l.Max)},
		})
	}
	if q, ok := r.Ratios(); ok {
		out.Ratios = &q
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
