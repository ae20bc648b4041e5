package image

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/trellisnet/trellis/internal/logline"
)

// Kernel is a guest kernel with the modules images load.
type Kernel struct {
	Dir     string   // where it is kept
	Release string   // e.g. 6.1.0-56-amd64
	Package string   // the Debian package it came from
	Modules []string // paths below lib/modules/RELEASE, in load order
}

// guestModules are the drivers a guest needs that Debian's kernel builds as modules: the
// virtio PCI transport, virtio-net for ports and virtio-console for the agent's port.
var guestModules = []string{"virtio_pci", "virtio_net", "virtio_console"}

// FetchKernel returns the guest kernel kept in cache, downloading Debian's linux-image-amd64
// (through apt, so from the machine's configured mirror) the first time. Only the kernel and the
// modules guests load are kept.
func FetchKernel(ctx context.Context, cache string, log *slog.Logger) (Kernel, error) {
	root := filepath.Join(cache, "kernels")
	if ks, _ := filepath.Glob(filepath.Join(root, "*", "kernel.txt")); len(ks) > 0 {
		sort.Strings(ks)
		return loadKernel(filepath.Dir(ks[len(ks)-1]))
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Kernel{}, err
	}
	tmp, err := os.MkdirTemp(root, ".fetch-")
	if err != nil {
		return Kernel{}, err
	}
	defer os.RemoveAll(tmp)
	pkg, err := kernelPackage(ctx)
	if err != nil {
		return Kernel{}, err
	}
	logline.OrDiscard(log).Info("image: downloading the guest kernel "+pkg, "package", pkg)
	if err := AptDownload(ctx, tmp, pkg); err != nil {
		return Kernel{}, err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return Kernel{}, fmt.Errorf("image: apt-get download %s gave %d packages", pkg, len(debs))
	}
	x := filepath.Join(tmp, "x")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
		return Kernel{}, fmt.Errorf("image: unpacking %s: %v: %s", pkg, err, out)
	}
	release, err := keepKernel(x, filepath.Join(tmp, "k"), pkg)
	if err != nil {
		return Kernel{}, err
	}
	dir := filepath.Join(root, release)
	os.RemoveAll(dir)
	if err := os.Rename(filepath.Join(tmp, "k"), dir); err != nil {
		return Kernel{}, err
	}
	return loadKernel(dir)
}

// kernelPackage names the package linux-image-amd64 depends on.
func kernelPackage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("image: apt-cache depends linux-image-amd64: %v", err)
	}
	m := regexp.MustCompile(`Depends: (linux-image-[0-9][^\s]*)`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("image: apt does not know linux-image-amd64; run apt-get update")
	}
	return string(m[1]), nil
}

// AptDownload downloads Debian package pkg into dir through apt (the machine's configured
// mirror), updating apt's lists once if the package is not known yet.
func AptDownload(ctx context.Context, dir, pkg string) error {
	run := func() ([]byte, error) {
		c := exec.CommandContext(ctx, "apt-get", "download", "-qq", pkg)
		c.Dir = dir
		return c.CombinedOutput()
	}
	if _, err := run(); err == nil {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); err != nil {
		return fmt.Errorf("image: apt-get update: %v: %s", err, out)
	}
	if out, err := run(); err != nil {
		return fmt.Errorf("image: apt-get download %s: %v: %s", pkg, err, out)
	}
	return nil
}

// keepKernel copies the kernel and the guest's modules (with what they depend on) from an
// unpacked package x into dir, and returns the kernel's release.
func keepKernel(x, dir, pkg string) (string, error) {
	mods, _ := filepath.Glob(filepath.Join(x, "lib/modules/*"))
	if len(mods) != 1 {
		return "", fmt.Errorf("image: %s has no single lib/modules/RELEASE", pkg)
	}
	release := filepath.Base(mods[0])
	order, err := ModuleOrder(mods[0], guestModules)
	if err != nil {
		return "", err
	}
	copies := map[string]string{"vmlinuz": filepath.Join(x, "boot", "vmlinuz-"+release)}
	for _, m := range order {
		copies[filepath.Join("modules", m)] = filepath.Join(x, "lib/modules", release, m)
	}
	for to, from := range copies {
		if err := copyFile(from, filepath.Join(dir, to)); err != nil {
			return "", err
		}
	}
	meta := fmt.Sprintf("%s\n%s\n%s\n", release, pkg, strings.Join(order, " "))
	return release, os.WriteFile(filepath.Join(dir, "kernel.txt"), []byte(meta), 0o644)
}

func loadKernel(dir string) (Kernel, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kernel.txt"))
	if err != nil {
		return Kernel{}, err
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 3 {
		return Kernel{}, fmt.Errorf("image: %s/kernel.txt is damaged; remove %s", dir, dir)
	}
	k := Kernel{Dir: dir, Release: lines[0], Package: lines[1], Modules: strings.Fields(lines[2])}
	return k, nil
}

// ModuleOrder returns the modules named (without .ko) below dir (lib/modules/RELEASE) and all
// they depend on, as paths relative to dir, each after its dependencies. Dependencies come from
// each module's .modinfo section: a package ships no modules.dep (depmod makes it on install).
func ModuleOrder(dir string, names []string) ([]string, error) {
	byName := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(dir, p)
			byName[strings.ReplaceAll(strings.TrimSuffix(d.Name(), ".ko"), "-", "_")] = rel
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var order []string
	seen := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		rel, ok := byName[name]
		if !ok {
			return fmt.Errorf("image: the kernel has no module %s", name)
		}
		if seen[rel] {
			return nil
		}
		seen[rel] = true
		deps, err := moduleDepends(filepath.Join(dir, rel))
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, rel)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleDepends reads the depends= entry of a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("image: %s has no .modinfo", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range strings.Split(string(data), "\x00") {
		if v, ok := strings.CutPrefix(kv, "depends="); ok && v != "" {
			return strings.Split(v, ","), nil
		}
	}
	return nil, nil
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
