package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDashboard checks docs/grafana/trellis.json parses, has panels with queries, that every
// trellis metric its queries name is one trellis exports, and that it shows every metric
// trellis exports (but a few, listed).
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("../../docs/grafana/trellis.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	names := Names()
	used := map[string]bool{}
	metricRE := regexp.MustCompile(`\btrellis_[a-z0-9_]+`)
	for _, e := range exprs {
		for _, m := range metricRE.FindAllString(e, -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && slices.Contains(names, b) {
					base = b
				}
			}
			if !slices.Contains(names, base) {
				t.Errorf("the dashboard names %s, which trellis does not export (query %s)", m, e)
			}
			used[base] = true
		}
	}
	// Every metric is on the dashboard but the tunnels' frame counts (their bytes are).
	notShown := []string{"trellis_tunnel_rx_frames_total", "trellis_tunnel_tx_frames_total"}
	for _, n := range names {
		if !used[n] && !slices.Contains(notShown, n) {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
	if dash.Title == "" || len(dash.Panels) < 10 {
		t.Errorf("dashboard %q: %d panels", dash.Title, len(dash.Panels))
	}
}
