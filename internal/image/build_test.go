package image

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestModuleOrder reads the dependencies of real modules: those of the cached guest kernel.
func TestModuleOrder(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(DefaultCache, "kernels", "*", "modules"))
	if len(dirs) == 0 {
		testkit.Skip(t, "no guest kernel in "+DefaultCache+": trellis image build fetches it")
	}
	got, err := ModuleOrder(dirs[0], guestModules)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range got {
		pos[filepath.Base(m)] = i
	}
	for _, before := range [][2]string{{"virtio_ring.ko", "virtio_pci.ko"}, {"virtio.ko", "virtio_pci.ko"},
		{"failover.ko", "net_failover.ko"}, {"net_failover.ko", "virtio_net.ko"}, {"virtio.ko", "virtio_console.ko"}} {
		i, ok1 := pos[before[0]]
		j, ok2 := pos[before[1]]
		if !ok1 || !ok2 || i > j {
			t.Errorf("order %v: want %s before %s", got, before[0], before[1])
		}
	}
	if _, err := ModuleOrder(dirs[0], []string{"nope"}); err == nil {
		t.Error("an unknown module gave no error")
	}
	if _, err := os.Stat(filepath.Join(dirs[0], got[0])); err != nil {
		t.Error(err)
	}
}
