//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestVMOwnKernel boots a VM node with `vm: {kernel: ...}` given a copy of the default image's
// own kernel, relative to the topology file: trellis's initramfs still runs the agent, so the
// node's addresses are applied and exec answers, with the extra command line in the guest.
func TestVMOwnKernel(t *testing.T) {
	needQEMU(t)
	imgs, err := image.List(image.DefaultCache)
	if err != nil || len(imgs) == 0 {
		testkit.Skipf(t, "no cached guest image in %s (%v): trellis image build makes one (scripts/test.sh does)", image.DefaultCache, err)
	}
	e := start(t)
	registerNetwork("vmkern")
	path := writeTopo(t, `name: vmkern
nodes:
  v:
    kind: vm
    addresses:
      eth1: [10.0.1.1/24]
    vm: {kernel: my-vmlinuz, append: "trellis.test=own-kernel"}
  a:
    addresses:
      eth1: [10.0.1.2/24]
links:
  - endpoints: [v:eth1, a:eth1]
`)
	kernel, err := os.ReadFile(imgs[0].Kernel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "my-vmlinuz"), kernel, 0o644); err != nil {
		t.Fatal(err)
	}
	mustTrellis(t, e.state, "up", path)
	if got := mustExec(t, e.state, "vmkern", "v", "cat", "/proc/cmdline"); !strings.Contains(got, "trellis.test=own-kernel") {
		t.Errorf("the guest's command line %q lacks vm.append's trellis.test=own-kernel", got)
	}
	ping(t, e.state, "vmkern", "a", "10.0.1.1")
}
