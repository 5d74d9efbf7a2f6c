package tradeoff

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot file names written by WritePlots.
const (
	ReplayPlot = "snapshot-tradeoff-replay.png"
	GrowthPlot = "snapshot-tradeoff-growth.png"
	LagPlot    = "snapshot-tradeoff-lag.png"
)

var modeColors = map[bool]color.Color{
	false: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	true:  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// series is one measured curve against the limit.
type series struct {
	cold bool
	xys  plotter.XYs
}

func curves(rows []Row, y func(Row) float64) []series {
	var out []series
	for _, cold := range []bool{false, true} {
		s := series{cold: cold}
		for _, r := range rows {
			if v := y(r); r.Cold == cold && r.Limit > 0 && !math.IsNaN(v) {
				s.xys = append(s.xys, plotter.XY{X: float64(r.Limit), Y: v})
			}
		}
		if len(s.xys) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// WritePlots writes three PNG plots into dir against the limit (log scale): failover replay time,
// log growth per logical write (bytes: unlike bytes per second it does not depend on how fast the
// machine wrote), and p99 pruning lag (seconds). The replay SLO is drawn as a dashed line, and so
// is the growth SLO when a write rate judges it (slo.WriteRate, else the study's paced rate),
// converted to bytes per write at that rate. Runs with limit 0 cannot be placed on a log scale and
// are left out, and so are, from the lag plot, runs with pinned records: their p99 is not measured
// (the Markdown table gives how long they waited). A plot with no point left is written empty.
func WritePlots(dir string, rows []Row, slo SLO, rate float64, subtitle string) error {
	if slo.WriteRate > 0 {
		rate = slo.WriteRate
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	specs := []struct {
		file, title, ylabel string
		y                   func(Row) float64
		slo                 float64
		legendTop           bool // rising curves leave the top left free, flat high ones the bottom
	}{
		{ReplayPlot, "Failover replay time vs snapshot limit", "replay time (s)", func(r Row) float64 { return r.ReplaySeconds }, slo.MaxReplaySeconds, true},
		{GrowthPlot, "Log growth per write vs snapshot limit", "bytes appended per logical write", Row.GrowthBytesPerWrite, div(slo.MaxGrowthPerSecond, rate), false},
		{LagPlot, "Pruning lag (p99) vs snapshot limit", "superseded → deletable, p99 (s)", lagP99, 0, true},
	}
	for _, sp := range specs {
		title := sp.title + "\n" + subtitle
		if sp.file == LagPlot && slices.ContainsFunc(rows, func(r Row) bool { return r.Limit > 0 && r.Lag.Pinned > 0 }) {
			title += "\n(runs with pinned records left out: see the table)"
		}
		if err := writePlot(filepath.Join(dir, sp.file), title, sp.ylabel, curves(rows, sp.y), sp.slo, sp.legendTop); err != nil {
			return fmt.Errorf("plot %s: %w", sp.file, err)
		}
	}
	return nil
}

func writePlot(path, title, ylabel string, ss []series, slo float64, legendTop bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "share.snapshot.update.records.per.snapshot (log scale)"
	p.Y.Label.Text = ylabel
	if len(ss) > 0 {
		p.X.Scale = plot.LogScale{} // it panics on an axis without a positive value
	}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = legendTop
	p.Legend.Left = legendTop
	xmin, xmax := 0.0, 0.0
	for _, s := range ss {
		line, points, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return err
		}
		line.Color = modeColors[s.cold]
		line.Width = vg.Points(1.5)
		points.Color = modeColors[s.cold]
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add("cold-partition snapshots "+Mode(s.cold), line, points)
		for _, xy := range s.xys {
			if xmin == 0 || xy.X < xmin {
				xmin = xy.X
			}
			xmax = max(xmax, xy.X)
		}
	}
	p.X.Tick.Marker = limitTicks(ss)
	if slo > 0 && xmax > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: slo}, {X: xmax, Y: slo}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
		l.Color = color.Gray{Y: 0x40}
		p.Add(l)
		p.Legend.Add("SLO", l)
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// limitTicks labels the x axis with every studied limit.
func limitTicks(ss []series) plot.ConstantTicks {
	var xs []float64
	for _, s := range ss {
		for _, xy := range s.xys {
			xs = append(xs, xy.X)
		}
	}
	slices.Sort(xs)
	var ticks plot.ConstantTicks
	for _, x := range slices.Compact(xs) {
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
	}
	return ticks
}

// lagP99 is the p99 pruning lag of r, NaN (not plotted) when some of its records stayed pinned:
// the p99 of the deletable ones alone understates it, down to 0 when every record stayed pinned.
func lagP99(r Row) float64 {
	if r.Lag.Pinned > 0 {
		return math.NaN()
	}
	return r.Lag.SecondsP99
}
