package guestvm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cavaliergopher/cpio"
	"github.com/trellisnet/trellis/internal/image"
)

// bootModules are what the guest needs before it has a root: the virtio PCI transport, 9p over
// virtio, and overlayfs; and virtio_blk for its disk (a machine has one: tests look for a
// block device the nodes must not see). Those the kernel has built in are left out.
var bootModules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay", "virtio_blk"}

// writeInitramfs writes the guest's initramfs: init as /init, the modules (bootModules, and
// virtio_net for a guest with a network card) and their dependencies in /modules (in load order
// in /modules.txt), and the directories init mounts on.
func writeInitramfs(path, init string, k Kernel, modules []string) error {
	builtin, err := builtinModules(k)
	if err != nil {
		return err
	}
	var want []string
	for _, m := range modules {
		if !builtin[m] {
			want = append(want, m)
		}
	}
	order, err := image.ModuleOrder(k.Modules(), want)
	if err != nil {
		return fmt.Errorf("guestvm: %s: %w", k.Package, err)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := cpio.NewWriter(out)
	for _, d := range []string{"dev", "proc", "sys", "lower", "rw", "newroot", "results", "modules"} {
		if err := w.WriteHeader(&cpio.Header{Name: d, Mode: cpio.TypeDir | 0o755}); err != nil {
			out.Close()
			return err
		}
	}
	files := [][2]string{{"init", init}}
	var names []string
	for _, m := range order {
		files = append(files, [2]string{"modules/" + filepath.Base(m), filepath.Join(k.Modules(), m)})
		names = append(names, filepath.Base(m))
	}
	if err := addBytes(w, "modules.txt", []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		out.Close()
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f[1])
		if err == nil {
			err = addBytes(w, f[0], data, 0o755)
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func addBytes(w *cpio.Writer, name string, data []byte, mode cpio.FileMode) error {
	if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeReg | mode, Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// builtinModules reads modules.builtin: the drivers the kernel has without loading them.
func builtinModules(k Kernel) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(k.Modules(), "modules.builtin"))
	if err != nil {
		return nil, fmt.Errorf("guestvm: %s: %w", k.Package, err)
	}
	defer f.Close()
	in := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSuffix(filepath.Base(sc.Text()), ".ko")
		in[strings.ReplaceAll(name, "-", "_")] = true
	}
	return in, sc.Err()
}
