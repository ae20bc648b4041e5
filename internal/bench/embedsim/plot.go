package embedsim

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot draws, per workload, the acceptance ratio so far against the requests arrived (median
// over seeds per algorithm) as embed-WORKLOAD.png in dir, and returns the file names.
func Plot(res []*Result, dir string) ([]string, error) {
	var files []string
	byWorkload := map[string][]*Result{}
	var order []string
	for _, r := range res {
		if _, ok := byWorkload[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	for _, w := range order {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: acceptance over time (median over seeds)", w)
		p.X.Label.Text = "requests arrived"
		p.Y.Label.Text = "accepted so far"
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top, p.Legend.Left = false, false
		var lines []any
		for _, row := range Summarize(byWorkload[w]) {
			pts := medianCurve(byWorkload[w], row.Algorithm)
			if len(pts) > 0 {
				lines = append(lines, row.Algorithm, pts)
			}
		}
		if err := plotutil.AddLines(p, lines...); err != nil {
			return nil, err
		}
		file := "embed-" + sanitize(w) + ".png"
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, file)); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

func medianCurve(res []*Result, alg string) plotter.XYs {
	var curves [][]float64
	step := 0
	for _, r := range res {
		if r.Algorithm == alg {
			curves = append(curves, r.Curve)
			step = r.CurveStep
		}
	}
	n := len(curves[0])
	for _, c := range curves {
		n = min(n, len(c))
	}
	pts := make(plotter.XYs, n)
	for i := range pts {
		var xs []float64
		for _, c := range curves {
			xs = append(xs, c[i])
		}
		pts[i].X, pts[i].Y = float64((i+1)*step), median(xs)
	}
	return pts
}

func sanitize(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			out[i] = '_'
		}
	}
	return string(out)
}
