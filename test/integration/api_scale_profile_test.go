//go:build integration

package integration

import (
	"context"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/api"
	_ "github.com/trellisnet/trellis/internal/kinds/all" // inspect finds nodes through their kinds
	"github.com/trellisnet/trellis/internal/state"
)

// profileInspect times inspect of network name in this process (the API's handler, no socket
// and no other process) and prints the best of 20; with TRELLIS_PPROF=FILE it writes a CPU
// profile of those inspects to FILE.
func profileInspect(t *testing.T, stateDir, name string) time.Duration {
	t.Helper()
	st, err := state.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(context.Background(), st, api.Options{})
	if f := os.Getenv("TRELLIS_PPROF"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(out)
		defer func() { pprof.StopCPUProfile(); out.Close() }()
	}
	var best time.Duration
	for i := range 20 {
		t0 := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/networks/"+name, nil))
		d := time.Since(t0)
		if rec.Code != 200 {
			t.Fatalf("inspect in process: %d %s", rec.Code, rec.Body)
		}
		if i == 0 || d < best {
			best = d
		}
	}
	t.Logf("inspect in process: best of 20 %v", best.Round(100*time.Microsecond))
	return best
}
