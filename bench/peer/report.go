package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeReport prints the rounds, then the summary over them, then the replication cost, as
// Markdown tables.
func writeReport(w io.Writer, header string, o options, results []result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", header)
	fmt.Fprintf(&b, "| round | configuration | load | writes/s at %d | p50 at %d | p99 at %d | p50 at 1 | p99 at 1 | errors | writes/s ÷ etcd |\n", o.inflight, o.inflight, o.inflight)
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		load := fmt.Sprintf("%.2f", r.load)
		if !r.quiet {
			load += " (above -max-load)"
		}
		ratio := "–"
		if e, ok := peerOf(results, r); ok {
			ratio = fmt.Sprintf("%.3f", r.many.rate()/e.many.rate())
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.round, r.cfg.label(), load, count(r.many.rate()),
			dur(r.many.quantile(50)), dur(r.many.quantile(99)), dur(r.one.quantile(50)), dur(r.one.quantile(99)), errorsOf(r), ratio)
	}
	writeSummary(&b, o, results)
	writeReplicationCost(&b, results)
	_, err := io.WriteString(w, b.String())
	return err
}

// errorsOf is the failed writes of both measurements, with their causes.
func errorsOf(r result) string {
	n := r.many.errors + r.one.errors
	if n == 0 {
		return "0"
	}
	var causes []string
	for _, p := range []phase{r.many, r.one} {
		for c, k := range p.causes {
			causes = append(causes, fmt.Sprintf("%s=%d", c, k))
		}
	}
	slices.Sort(causes)
	return fmt.Sprintf("%d (%s)", n, strings.Join(causes, ", "))
}

// peerOf is the etcd result of r's round with r's node count, for a coordinatord result r.
func peerOf(results []result, r result) (result, bool) {
	if r.cfg.system == "etcd" {
		return result{}, false
	}
	for _, e := range results {
		if e.cfg.system == "etcd" && e.round == r.round && e.cfg.nodes == r.cfg.nodes {
			return e, true
		}
	}
	return result{}, false
}

// writeSummary prints, per configuration, the median and the spread over the rounds.
func writeSummary(b *strings.Builder, o options, results []result) {
	fmt.Fprintf(b, "\nmedian (min–max) over %d round(s); ratios: coordinatord ÷ etcd of the same node count, same round\n\n", o.rounds)
	fmt.Fprintf(b, "| configuration | writes/s at %d in flight | p50 at 1 in flight | p99 at 1 in flight | writes/s ÷ etcd | p50 ÷ etcd | p99 ÷ etcd |\n", o.inflight)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, label := range labels(results) {
		var rate, p50, p99, qRate, qP50, qP99 []float64
		for _, r := range results {
			if r.cfg.label() != label {
				continue
			}
			rate = append(rate, r.many.rate())
			p50 = append(p50, float64(r.one.quantile(50)))
			p99 = append(p99, float64(r.one.quantile(99)))
			if e, ok := peerOf(results, r); ok {
				qRate = append(qRate, r.many.rate()/e.many.rate())
				qP50 = append(qP50, float64(r.one.quantile(50))/float64(e.one.quantile(50)))
				qP99 = append(qP99, float64(r.one.quantile(99))/float64(e.one.quantile(99)))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", label, spread(rate, count), spread(p50, durF), spread(p99, durF),
			spread(qRate, ratio), spread(qP50, ratio), spread(qP99, ratio))
	}
}

// writeReplicationCost prints, per coordinatord binary, the three-node ÷ one-node throughput of
// each round.
func writeReplicationCost(b *strings.Builder, results []result) {
	type key struct {
		variant string
		round   int
	}
	one, oneRaft, three := map[key]float64{}, map[key]float64{}, map[key]float64{}
	for _, r := range results {
		k := key{r.cfg.variant, r.round}
		switch {
		case r.cfg.system != "coordinatord":
		case r.cfg.nodes == 3:
			three[k] = r.many.rate()
		case r.cfg.raft:
			oneRaft[k] = r.many.rate()
		default:
			one[k] = r.many.rate()
		}
	}
	var lines []string
	for _, variant := range variants(results) {
		var q, qRaft []float64
		for k, t := range three {
			if k.variant != variant {
				continue
			}
			if v, ok := one[k]; ok {
				q = append(q, t/v)
			}
			if v, ok := oneRaft[k]; ok {
				qRaft = append(qRaft, t/v)
			}
		}
		name := "coordinatord"
		if variant != "" {
			name += " (" + variant + ")"
		}
		if len(q) > 0 {
			lines = append(lines, fmt.Sprintf("| %s | 3 nodes ÷ 1 node | %s |", name, spread(q, ratio)))
		}
		if len(qRaft) > 0 {
			lines = append(lines, fmt.Sprintf("| %s | 3 nodes ÷ 1-node cluster | %s |", name, spread(qRaft, ratio)))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\nreplication cost: writes/s at the same in-flight count, same round\n\n| binary | ratio | median (min–max) |\n|---|---|---:|\n")
	b.WriteString(strings.Join(lines, "\n") + "\n")
}

// labels are the configurations' labels in the order they first ran.
func labels(results []result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.cfg.label()) {
			out = append(out, r.cfg.label())
		}
	}
	return out
}

// variants are the coordinatord binaries' labels in the order they first ran.
func variants(results []result) []string {
	var out []string
	for _, r := range results {
		if r.cfg.system == "coordinatord" && !slices.Contains(out, r.cfg.variant) {
			out = append(out, r.cfg.variant)
		}
	}
	return out
}

// spread is "median (min–max)" of xs, or the value alone for one, or "–" for none.
func spread(xs []float64, format func(float64) string) string {
	switch len(xs) {
	case 0:
		return "–"
	case 1:
		return format(xs[0])
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%s (%s–%s)", format(median(s)), format(s[0]), format(s[len(s)-1]))
}

// median of sorted xs: the middle value, or the mean of the two middle ones.
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// count formats a rate as a whole number with thin groups of three digits: 12 345.
func count(x float64) string {
	s := strconv.FormatInt(int64(x+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func ratio(x float64) string { return fmt.Sprintf("%.3f", x) }

func durF(x float64) string { return dur(time.Duration(x)) }

// dur formats a latency with three significant digits: 812 µs, 1.23 ms, 2.50 s.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
