package latency

import (
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Highest is the largest duration a Histogram tracks; longer samples are recorded as Highest.
const Highest = time.Minute

// Histogram is a latency distribution.
type Histogram struct {
	h *hdrhistogram.Histogram
}

// New returns an empty Histogram.
func New() *Histogram {
	return &Histogram{h: hdrhistogram.New(1, int64(Highest), 3)}
}

// Record adds one sample. Negative samples count as zero, samples above Highest as Highest.
func (h *Histogram) Record(d time.Duration) {
	v := min(max(int64(d), 1), int64(Highest))
	// The value is clamped into the tracked range, so RecordValue cannot fail.
	_ = h.h.RecordValue(v)
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	h.h.Merge(o.h)
}

// Quantile returns the sample at percentile p (0–100); 0 for an empty histogram.
func (h *Histogram) Quantile(p float64) time.Duration {
	return time.Duration(h.h.ValueAtQuantile(p))
}

// Summary is the distribution as the reports print it. Every field is zero for no samples.
type Summary struct {
	Count int64
	Min   time.Duration
	Mean  time.Duration
	P50   time.Duration
	P90   time.Duration
	P99   time.Duration
	P999  time.Duration
	Max   time.Duration
}

// Summary returns h's count, extremes, mean and percentiles.
func (h *Histogram) Summary() Summary {
	if h.h.TotalCount() == 0 {
		return Summary{}
	}
	return Summary{
		Count: h.h.TotalCount(),
		Min:   time.Duration(h.h.Min()),
		Mean:  time.Duration(h.h.Mean()),
		P50:   h.Quantile(50),
		P90:   h.Quantile(90),
		P99:   h.Quantile(99),
		P999:  h.Quantile(99.9),
		Max:   time.Duration(h.h.Max()),
	}
}

// String is a one-line rendering: "n=… p50=… p90=… p99=… p99.9=… max=…".
func (s Summary) String() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s p99.9=%s max=%s",
		s.Count, Format(s.P50), Format(s.P90), Format(s.P99), Format(s.P999), Format(s.Max))
}

// Format renders d in µs with one decimal below one millisecond, and with three significant
// digits in ms below one second and in s above ("87.3µs", "1.25ms", "2.01s").
func Format(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.3gs", d.Seconds())
	}
}
