//go:build integration

package integration

import (
	"compress/gzip"
	"io"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	_ "github.com/trellisnet/trellis/internal/kinds/all" // the collector finds nodes through their kinds
	"github.com/trellisnet/trellis/internal/metrics"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestMetricsScale times scrapes of /metrics of a 1000-node chain in this process (target:
// under 200 ms, gzip as Prometheus asks for it) and prints the figure; with TRELLIS_PPROF=FILE
// it writes a CPU profile of the scrapes. It takes a minute, so it runs only with
// TRELLIS_API_SCALE=1.
func TestMetricsScale(t *testing.T) {
	if testing.Short() || os.Getenv("TRELLIS_API_SCALE") == "" {
		testkit.Skip(t, "opt-in: the 1000-node chain runs with TRELLIS_API_SCALE=1, not in -short")
	}
	const n = 1000
	e := start(t)
	registerNetwork("mscale")
	t0 := time.Now()
	mustTrellis(t, e.state, "up", writeTopo(t, chainTopo("mscale", n)))
	t.Logf("up of the %d-node chain: %v", n, time.Since(t0).Round(time.Millisecond))
	st, err := state.Open(e.state)
	if err != nil {
		t.Fatal(err)
	}
	h := metrics.New(st).Handler()
	if f := os.Getenv("TRELLIS_PPROF"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(out)
		defer func() { pprof.StopCPUProfile(); out.Close() }()
	}
	var best time.Duration
	for i := range 10 {
		t0 := time.Now()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		d := time.Since(t0)
		if i == 0 {
			gz := rec.Body.Len()
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(zr)
			if c := strings.Count(string(body), "\ntrellis_port_tx_frames_total{"); c != 2*(n-1) {
				t.Errorf("/metrics has %d port tx series, want %d", c, 2*(n-1))
			}
			if c := strings.Count(string(body), "\ntrellis_node_up{"); c != n || countNodeDown(string(body)) > 0 {
				t.Errorf("/metrics has %d node series (%d down), want %d up", c, countNodeDown(string(body)), n)
			}
			t.Logf("scrape: %d bytes, %d gzipped", len(body), gz)
		}
		if i == 0 || d < best {
			best = d
		}
	}
	t.Logf("/metrics of the %d-node chain, in process: best of 10 %v (target < 200ms)", n, best.Round(time.Millisecond))
	mustTrellis(t, e.state, "down", "mscale")
	e.assertClean()
}

// countNodeDown counts the nodes a scrape says do not run.
func countNodeDown(text string) int {
	c := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "trellis_node_up{") && strings.HasSuffix(l, "} 0") {
			c++
		}
	}
	return c
}
