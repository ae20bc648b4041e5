package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestDiskOverlay makes the overlay of a raw disk with qemu-img: backed by the user's file,
// which stays as it was, in the state directory, and swept once its VM does not run.
func TestDiskOverlay(t *testing.T) {
	testkit.RequireTool(t, QEMUImg, "scripts/setup.sh installs qemu-utils")
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	orig := bytes.Repeat([]byte{0xa5}, 1<<20)
	if err := os.WriteFile(disk, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	env := &kinds.Env{Store: &state.Store{Dir: filepath.Join(dir, "state"), ID: "s"}, Plan: &plan.Plan{NetID: "n1"}}
	n := &plan.Node{Node: &spec.Node{Name: "v", Settings: spec.NewKindSettings(&Settings{Disk: disk, DiskFormat: "raw"})}}
	args, err := diskArgs(context.Background(), env, n)
	if err != nil {
		t.Fatal(err)
	}
	overlay := overlayPath(env, "v")
	if !slices.Contains(args, "file="+overlay+",format=qcow2,if=virtio") {
		t.Errorf("args %q do not attach %s", args, overlay)
	}
	out, err := exec.Command(QEMUImg, "info", "--output=json", overlay).Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Format          string `json:"format"`
		BackingFilename string `json:"backing-filename"`
		BackingFormat   string `json:"backing-filename-format"`
		VirtualSize     int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.BackingFilename != disk || info.BackingFormat != "raw" || info.VirtualSize != 1<<20 {
		t.Errorf("overlay %+v, want qcow2 backed by %s (raw, 1 MiB)", info, disk)
	}
	if got, _ := os.ReadFile(disk); !bytes.Equal(got, orig) {
		t.Error("the user's disk changed")
	}
	if err := sweepOverlays(env, map[string]kinds.Instance{"v": {Kind: Name, Name: "v"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(overlay); err != nil {
		t.Errorf("the overlay of a running VM was swept: %v", err)
	}
	if err := sweepOverlays(env, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(overlay); !os.IsNotExist(err) {
		t.Errorf("the overlay of a VM that does not run is still there (%v)", err)
	}
	if args, err := diskArgs(context.Background(), env, &plan.Node{Node: &spec.Node{Name: "w"}}); err != nil || args != nil {
		t.Errorf("a VM without a disk: %q, %v; want nothing", args, err)
	}
	if b := boot(image.Image{Kernel: "/cache/vmlinuz", Initrd: "/cache/initrd"}, "v", knobs(n.Node)); b != nil {
		t.Errorf("boot options %q for a VM with its own disk, want none", b)
	}
}
