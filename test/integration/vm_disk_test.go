//go:build integration

package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// qemuWith returns the pid of the QEMU whose command line holds s, or 0.
func qemuWith(s string) int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		data, err := os.ReadFile(c)
		if err == nil && bytes.HasPrefix(data, []byte("qemu-system")) && bytes.Contains(data, []byte(s)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(c)))
			return pid
		}
	}
	return 0
}

// TestVMDisk brings up a VM node with the user's own disk (a qcow2 image made with qemu-img):
// QEMU runs with the copy-on-write overlay in the state directory attached, backed by the
// user's file, which stays as it was. After QEMU is killed, `down` removes the overlay it left.
func TestVMDisk(t *testing.T) {
	needQEMU(t)
	testkit.RequireTool(t, "qemu-img", "scripts/setup.sh installs qemu-utils")
	e := start(t)
	registerNetwork("vmdisk")
	path := writeTopo(t, "name: vmdisk\nnodes:\n  v:\n    kind: vm\n    vm: {disk: my.qcow2}\n")
	disk := filepath.Join(filepath.Dir(path), "my.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	before, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	mustTrellis(t, e.state, "up", path)
	overlays, _ := filepath.Glob(filepath.Join(e.state, "vm", "*-v.qcow2"))
	if len(overlays) != 1 {
		t.Fatalf("overlays in %s: %q, want one", filepath.Join(e.state, "vm"), overlays)
	}
	pid := qemuWith("file=" + overlays[0] + ",format=qcow2,if=virtio")
	if pid == 0 {
		t.Fatalf("no QEMU with %s attached", overlays[0])
	}
	info, err := exec.Command("qemu-img", "info", "-U", overlays[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(info), "backing file: "+disk) {
		t.Errorf("qemu-img info %s: %v:\n%s\nwant it backed by %s", overlays[0], err, info, disk)
	}
	time.Sleep(2 * time.Second) // the firmware reads the disk
	if after, _ := os.ReadFile(disk); !bytes.Equal(before, after) {
		t.Error("the user's disk image changed")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for qemuWith(overlays[0]) != 0 {
		time.Sleep(100 * time.Millisecond)
	}
	if ls := mustTrellis(t, e.state, "ls"); !strings.Contains(ls, "not running") {
		t.Errorf("ls after kill -9 of QEMU:\n%s", ls)
	}
	mustTrellis(t, e.state, "down", "vmdisk")
	if _, err := os.Stat(overlays[0]); !os.IsNotExist(err) {
		t.Errorf("the overlay %s is still there after down (%v)", overlays[0], err)
	}
	e.assertClean()
}
