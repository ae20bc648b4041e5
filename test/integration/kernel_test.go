//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/dataplane"
)

// TestKernelCorrupt: on a kernel without what corruption needs (before 6.2, e.g. Debian 12's
// 6.1, where TestGuestKernel runs it), `diff` and `up` refuse a corrupting link before anything
// is made, naming the feature, the kernel found and the one needed; on a kernel with it, `up`
// makes the link. Loss works on both (TestImpairedLoss).
func TestKernelCorrupt(t *testing.T) {
	e := start(t)
	path := writeTopo(t, `name: kcorrupt
nodes:
  a: {}
  b: {}
links:
  - endpoints: [a:eth1, b:eth1]
    loss: 1%
    corrupt: 1%
`)
	if dataplane.CheckCorrupt() == nil {
		mustTrellis(t, e.state, "up", path)
		mustTrellis(t, e.state, "down", "kcorrupt")
		e.assertClean()
		return
	}
	for _, cmd := range []string{"diff", "up"} {
		out, errOut, err := trellis(t, e.state, cmd, path)
		if err == nil {
			t.Fatalf("%s of a corrupting link succeeded on %s:\n%s", cmd, dataplane.KernelRelease(), out)
		}
		for _, want := range []string{":8: links[0].corrupt:", "Linux 6.2 or later", dataplane.KernelRelease(), "remove corrupt"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s said %q, want it to contain %q", cmd, errOut, want)
			}
		}
	}
	if got := listNetworks(t, e.state); len(got) != 0 {
		t.Errorf("ls lists %v after the refused up, want nothing", got)
	}
	e.assertClean()
}
