package report

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"

	"github.com/trellisnet/trellis/internal/bench/result"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot files, written by Plot when the report has their figures.
const (
	PlotCurves  = "input-output.png"
	PlotPeak    = "peak.png"
	PlotSizes   = "sizes.png"
	PlotScaling = "scaling.png"
	PlotDeploy  = "deploy.png"
)

// Plot draws the report's figures as PNG files in dir.
func Plot(rep *result.Report, dir string) error {
	for _, f := range []struct {
		file string
		make func(*result.Report) (*plot.Plot, error)
	}{{PlotCurves, curvesPlot}, {PlotPeak, peakPlot}, {PlotSizes, sizesPlot}, {PlotScaling, scalingPlot}, {PlotDeploy, deployPlot}} {
		p, err := f.make(rep)
		if err != nil {
			return fmt.Errorf("%s: %w", f.file, err)
		}
		if p == nil {
			continue
		}
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, f.file)); err != nil {
			return err
		}
	}
	return nil
}

// PlotsOf lists the plot files the report has figures for.
func PlotsOf(rep *result.Report) []string {
	var out []string
	if len(rep.Setups) > 0 {
		out = append(out, PlotCurves, PlotPeak)
	}
	if len(rep.Sizes) > 0 {
		out = append(out, PlotSizes)
	}
	if len(rep.Scaling) > 0 {
		out = append(out, PlotScaling)
	}
	if len(rep.Deploy) > 0 {
		out = append(out, PlotDeploy)
	}
	return out
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// medianRep returns the index of the repetition whose peak is the median one.
func medianRep(s *result.SetupResult) int {
	idx := make([]int, len(s.Sweeps))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return result.PeakOf(s.Sweeps[idx[a]]) < result.PeakOf(s.Sweeps[idx[b]]) })
	if len(idx) == 0 {
		return -1
	}
	return idx[(len(idx)-1)/2]
}

func curvesPlot(rep *result.Report) (*plot.Plot, error) {
	if len(rep.Setups) == 0 {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("Input vs output, %d-byte frames (repetition with the median peak)", rep.Config.FrameSize), "input (kpps)", "output (kpps)")
	maxIn := 0.0
	for i, s := range rep.Setups {
		m := medianRep(s)
		if m < 0 {
			continue
		}
		var pts plotter.XYs
		for _, t := range s.Sweeps[m] {
			pts = append(pts, plotter.XY{X: t.In / 1e3, Y: t.Out / 1e3})
			maxIn = max(maxIn, t.In/1e3)
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: maxIn, Y: maxIn}})
	if err != nil {
		return nil, err
	}
	diag.Color = color.Gray{Y: 160}
	diag.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	p.Legend.Add("output = input", diag)
	return p, nil
}

func peakPlot(rep *result.Report) (*plot.Plot, error) {
	if len(rep.Setups) == 0 {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("Peak forwarding rate, %d-byte frames (median, min-max)", rep.Config.FrameSize), "", "kpps")
	var vals plotter.Values
	var errs plotter.YErrors
	var names []string
	if g := rep.Generator; g != nil {
		vals = append(vals, g.Delivered.Median/1e3)
		errs = append(errs, struct{ Low, High float64 }{(g.Delivered.Median - g.Delivered.Min) / 1e3, (g.Delivered.Max - g.Delivered.Median) / 1e3})
		names = append(names, "generator")
	}
	for _, s := range rep.Setups {
		vals = append(vals, s.Peak.Median/1e3)
		errs = append(errs, struct{ Low, High float64 }{(s.Peak.Median - s.Peak.Min) / 1e3, (s.Peak.Max - s.Peak.Median) / 1e3})
		names = append(names, s.Name)
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars)
	var pts plotter.XYs
	for i, v := range vals {
		pts = append(pts, plotter.XY{X: float64(i), Y: v})
	}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYer
		plotter.YErrorer
	}{pts, errs})
	if err != nil {
		return nil, err
	}
	p.Add(eb)
	p.NominalX(names...)
	// Slanted names: eight bars of long setup names do not fit side by side.
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Legend.Top = false
	return p, nil
}

func sizesPlot(rep *result.Report) (*plot.Plot, error) {
	if len(rep.Sizes) == 0 {
		return nil, nil
	}
	p := newPlot("Peak forwarding rate by frame size (median)", "frame size (bytes)", "kpps")
	p.Legend.Left = false
	bySetup := map[string]plotter.XYs{}
	var order []string
	for _, s := range rep.Sizes {
		if _, ok := bySetup[s.Setup]; !ok {
			order = append(order, s.Setup)
		}
		bySetup[s.Setup] = append(bySetup[s.Setup], plotter.XY{X: float64(s.Size), Y: s.Peak.Median / 1e3})
	}
	for i, name := range order {
		if err := addLine(p, i, name, bySetup[name]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func scalingPlot(rep *result.Report) (*plot.Plot, error) {
	if len(rep.Scaling) == 0 {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("Aggregate forwarding rate of parallel networks, %d-byte frames", rep.Config.FrameSize), "virtual networks", "kpps (all networks together)")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Left = false
	bySetup := map[string]plotter.XYs{}
	var order []string
	for _, s := range rep.Scaling {
		if _, ok := bySetup[s.Setup]; !ok {
			order = append(order, s.Setup)
		}
		bySetup[s.Setup] = append(bySetup[s.Setup], plotter.XY{X: float64(s.Networks), Y: s.Aggregate.Median / 1e3})
	}
	for i, name := range order {
		if err := addLine(p, i, name, bySetup[name]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func deployPlot(rep *result.Report) (*plot.Plot, error) {
	if len(rep.Deploy) == 0 {
		return nil, nil
	}
	p := newPlot("Time to bring a chain of nodes up and down (median)", "nodes in the chain", "seconds")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	lines := map[string]plotter.XYs{}
	var order []string
	for _, d := range rep.Deploy {
		for _, k := range []struct {
			what string
			v    float64
		}{{"up", d.Up.Median}, {"down", d.Down.Median}} {
			key := d.Tool + " " + k.what
			if _, ok := lines[key]; !ok {
				order = append(order, key)
			}
			lines[key] = append(lines[key], plotter.XY{X: float64(d.Nodes), Y: max(k.v, 1e-3)})
		}
	}
	for i, name := range order {
		if err := addLine(p, i, name, lines[name]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func addLine(p *plot.Plot, i int, name string, pts plotter.XYs) error {
	sort.Slice(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
	l, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
	sc.Shape = plotutil.Shape(i)
	p.Add(l, sc)
	p.Legend.Add(name, l, sc)
	return nil
}
