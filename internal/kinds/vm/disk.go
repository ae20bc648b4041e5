package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// QEMUImg makes the overlays of users' disk images.
const QEMUImg = "qemu-img"

// ErrNoQEMUImg is returned for a VM with its own disk on a machine without qemu-img.
var ErrNoQEMUImg = errors.New("VM nodes with a disk need qemu-img: install qemu-utils")

// overlayPath is where the copy-on-write overlay of a node's disk is kept: the guest writes
// there, never to the user's file.
func overlayPath(env *kinds.Env, name string) string {
	return filepath.Join(env.Store.Dir, "vm", env.Plan.NetID+"-"+name+".qcow2")
}

// diskArgs makes a fresh overlay of node n's disk (a VM starts from the disk as the user left
// it, as a container starts from its files) and returns QEMU's options for it; none for a node
// without a disk.
func diskArgs(ctx context.Context, env *kinds.Env, n *plan.Node) ([]string, error) {
	if knobs(n.Node) == nil || knobs(n.Node).Disk == "" {
		return nil, nil
	}
	if _, err := exec.LookPath(QEMUImg); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoQEMUImg, err)
	}
	// Checked again as QEMU is to read it: the file may have changed since it was parsed, and
	// a qcow2 image that names another file (a backing file: any file or device of the machine)
	// is refused.
	format, err := spec.DiskFormat(knobs(n.Node).Disk)
	if err == nil && format != knobs(n.Node).DiskFormat {
		err = fmt.Errorf("%s is %s now, not %s as when the file was read", knobs(n.Node).Disk, format, knobs(n.Node).DiskFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("VM %s: disk: %w", n.Name, err)
	}
	path := overlayPath(env, n.Name)
	if err := os.MkdirAll(filepath.Dir(path), state.DirMode); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	c := exec.CommandContext(ctx, QEMUImg, "create", "-q", "-f", "qcow2", "-b", knobs(n.Node).Disk, "-F", knobs(n.Node).DiskFormat, path)
	if out, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("overlay of %s: %s: %v: %s", knobs(n.Node).Disk, QEMUImg, err, strings.TrimSpace(string(out)))
	}
	return []string{"-drive", "file=" + path + ",format=qcow2,if=virtio", "-boot", "c"}, nil
}

// removeOverlay deletes the overlay of a node that has ended.
func removeOverlay(env *kinds.Env, name string) error {
	if err := os.Remove(overlayPath(env, name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// sweepOverlays deletes the overlays of the network's VMs that do not run (QEMU was killed, or
// trellis while it started one).
func sweepOverlays(env *kinds.Env, running map[string]kinds.Instance) error {
	prefix := filepath.Join(env.Store.Dir, "vm", env.Plan.NetID+"-")
	found, _ := filepath.Glob(prefix + "*.qcow2")
	for _, f := range found {
		name := strings.TrimSuffix(strings.TrimPrefix(f, prefix), ".qcow2")
		if in, ok := running[name]; ok && in.Kind == Name {
			continue
		}
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}
