//go:build integration

package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestEbpfBench runs the bench's setup ebpf-l3 (a node under test forwarding with
// examples/ebpf/l3's program) beside native, once and short, and checks that it carries
// frames and has its figures and ratios to native. It does not check that it is fast: the
// machine may be busy with other work (docs/ebpf-nodes.md has the figures).
func TestEbpfBench(t *testing.T) {
	testkit.RequireRoot(t)
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatalf("clang is not installed (%v): scripts/setup.sh installs it (Debian: apt-get install clang)", err)
	}
	dir := t.TempDir()
	bin := buildBench(t, dir)
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "--state-dir", filepath.Join(dir, "state"), "--quick", "--repeat", "1",
		"--parts", "forward,cpu", "--setups", "native,ebpf-l3", "--out", out)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	output, err := cmd.CombinedOutput()
	t.Logf("trellis-bench:\n%s", output)
	if err != nil {
		t.Fatalf("trellis-bench: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep result.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("bench.json: %v", err)
	}
	var peak, cpu bool
	for _, s := range rep.Setups {
		if s.Name == "ebpf-l3" {
			peak = s.Peak.Median > 0 && s.PeakRatio != nil && s.PeakRatio.Median > 0
		}
	}
	for _, c := range rep.CPU {
		if c.Setup == "ebpf-l3" {
			cpu = c.Net.Median > 0 && c.Ratio != nil
		}
	}
	if !peak || !cpu {
		t.Errorf("ebpf-l3: a peak with its ratio to native %v, CPU per frame with its ratio %v; want both", peak, cpu)
	}
}
