package embedsim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestQuick is `trellis-bench --parts embed --quick` without the CLI: every algorithm on both
// workloads, written as embed.md, plots and JSON, in well under a minute.
func TestQuick(t *testing.T) {
	testkit.NotShort(t, "about 10 s")
	dir := t.TempDir()
	start := time.Now()
	res, err := RunCLI(context.Background(), Options{Quick: true, WriteTrace: filepath.Join(dir, "tr.json")}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("quick run took %s", took)
	}
	if len(res) != 12 {
		t.Fatalf("%d results, want 2 workloads × 3 seeds × 2 algorithms", len(res))
	}
	for _, r := range res {
		if r.Requests == 0 || r.Accept <= 0 || r.Accept > 1 || r.LRC <= 0 || len(r.Curve) == 0 {
			t.Errorf("%+v", r)
		}
	}
	for _, f := range []string{"embed.md", "embed-wx100.png", "embed-testbed.png", "tr-wx100-0.json", "tr-testbed-2222.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	data, _ := json.Marshal(res[0])
	for _, k := range []string{"algorithm", "workload", "seed", "requests", "acceptance", "lrc", "lar", "seconds_per_request_median", "seconds_per_request_p99"} {
		if !strings.Contains(string(data), `"`+k+`"`) {
			t.Errorf("result JSON lacks %q", k)
		}
	}
	// Our algorithms must beat the baselines on the same instances.
	rows := Summarize(res)
	if rows[1].Accept <= rows[0].Accept || rows[3].Accept < rows[2].Accept || rows[3].CrossBW >= rows[2].CrossBW {
		t.Errorf("ours does not beat the baseline: %+v", rows)
	}
}

func TestTakePart(t *testing.T) {
	rest, ok := TakePart([]string{"forward", "embed", "cpu"})
	if !ok || strings.Join(rest, ",") != "forward,cpu" {
		t.Fatal(rest, ok)
	}
	if _, ok := TakePart([]string{"forward"}); ok {
		t.Fatal("found embed in forward")
	}
}
