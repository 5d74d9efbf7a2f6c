package latency

import (
	"testing"
	"time"
)

func TestSummaryPercentiles(t *testing.T) {
	tests := []struct {
		name    string
		samples []time.Duration
		want    Summary
	}{
		{name: "empty", want: Summary{}},
		{
			name:    "one sample",
			samples: []time.Duration{250 * time.Microsecond},
			want: Summary{Count: 1, Min: 250 * time.Microsecond, Mean: 250 * time.Microsecond, P50: 250 * time.Microsecond,
				P90: 250 * time.Microsecond, P99: 250 * time.Microsecond, P999: 250 * time.Microsecond, Max: 250 * time.Microsecond},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := New()
			for _, s := range tc.samples {
				h.Record(s)
			}
			got := h.Summary()
			if !nearSummary(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// nearSummary compares summaries within the histogram's 0.1 % precision.
func nearSummary(a, b Summary) bool {
	near := func(x, y time.Duration) bool {
		d := x - y
		if d < 0 {
			d = -d
		}
		return float64(d) <= 0.001*float64(max(x, y))+1
	}
	return a.Count == b.Count && near(a.Min, b.Min) && near(a.Mean, b.Mean) && near(a.P50, b.P50) &&
		near(a.P90, b.P90) && near(a.P99, b.P99) && near(a.P999, b.P999) && near(a.Max, b.Max)
}

func TestQuantilesOfUniformSamples(t *testing.T) {
	h := New()
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{
		{50, 5000 * time.Microsecond},
		{90, 9000 * time.Microsecond},
		{99, 9900 * time.Microsecond},
		{99.9, 9990 * time.Microsecond},
		{100, 10000 * time.Microsecond},
	}
	for _, tc := range tests {
		got := h.Quantile(tc.p)
		if diff := got - tc.want; diff < -tc.want/500 || diff > tc.want/500 {
			t.Errorf("p%v = %v, want %v ± 0.2%%", tc.p, got, tc.want)
		}
	}
}

func TestMergeAndClamp(t *testing.T) {
	a, b := New(), New()
	a.Record(-time.Second) // counts as the smallest value
	b.Record(2 * Highest)  // counts as Highest
	a.Merge(b)
	s := a.Summary()
	if s.Count != 2 {
		t.Fatalf("count %d, want 2", s.Count)
	}
	if s.Min > time.Microsecond {
		t.Errorf("min %v, want about 1ns", s.Min)
	}
	if s.Max < Highest*999/1000 || s.Max > Highest*1001/1000 {
		t.Errorf("max %v, want about %v", s.Max, Highest)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{87300 * time.Nanosecond, "87.3µs"},
		{1250 * time.Microsecond, "1.25ms"},
		{125 * time.Millisecond, "125ms"},
		{2010 * time.Millisecond, "2.01s"},
	}
	for _, tc := range tests {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
