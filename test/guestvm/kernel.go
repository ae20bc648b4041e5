package guestvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/image"
)

// ErrMissing is wrapped by every error that says a tool or package the harness needs is not
// there; the message names it and how to get it.
var ErrMissing = errors.New("guestvm: missing")

// Kernel is a Debian kernel package unpacked into the cache: the kernel image and its whole
// modules tree, with the modules.dep that depmod made, so that the guest's modprobe works.
type Kernel struct {
	Dir     string // the unpacked package: Dir/vmlinuz, Dir/lib/modules/RELEASE
	Release string // e.g. 6.1.0-56-amd64 (uname -r in the guest)
	Package string // e.g. linux-image-6.1.0-56-amd64
}

// Vmlinuz is the kernel image's path.
func (k Kernel) Vmlinuz() string { return filepath.Join(k.Dir, "vmlinuz") }

// Modules is the guest's /lib/modules/RELEASE, on the host.
func (k Kernel) Modules() string { return filepath.Join(k.Dir, "lib", "modules", k.Release) }

// DefaultCache is where kernels are kept: beside the VM kind's images (internal/image).
const DefaultCache = "/var/cache/trellis"

// release is a full Debian kernel release for amd64.
var release = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-amd64$`)

// FetchKernel returns the kernel named by want, a series ("6.1": the newest Debian package of
// it that apt knows) or a full release ("6.1.0-56-amd64"), unpacking it into
// CACHE/guest-kernels/RELEASE the first time: apt-get download (nothing is installed on the
// host), dpkg-deb -x, depmod -b. Nothing in the host's /boot or /lib/modules changes.
func FetchKernel(ctx context.Context, cache, want string, log io.Writer) (Kernel, error) {
	if err := need("apt-get", "apt (Debian's package tools)"); err != nil {
		return Kernel{}, err
	}
	pkg, err := kernelPackage(ctx, want)
	if err != nil {
		return Kernel{}, err
	}
	rel := strings.TrimPrefix(pkg, "linux-image-")
	root := filepath.Join(cache, "guest-kernels")
	k := Kernel{Dir: filepath.Join(root, rel), Release: rel, Package: pkg}
	if _, err := os.Stat(filepath.Join(k.Dir, "ok")); err == nil {
		return k, nil
	}
	for _, t := range [][2]string{{"dpkg-deb", "dpkg"}, {"depmod", "kmod"}} {
		if err := need(t[0], t[1]); err != nil {
			return Kernel{}, err
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Kernel{}, err
	}
	tmp, err := os.MkdirTemp(root, ".fetch-")
	if err != nil {
		return Kernel{}, err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(log, "guestvm: downloading %s into %s\n", pkg, root)
	if err := image.AptDownload(ctx, tmp, pkg); err != nil {
		return Kernel{}, err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return Kernel{}, fmt.Errorf("guestvm: apt-get download %s gave %d packages", pkg, len(debs))
	}
	x := filepath.Join(tmp, "x")
	steps := [][]string{
		{"dpkg-deb", "-x", debs[0], x},
		{"depmod", "-b", x, rel},
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return Kernel{}, fmt.Errorf("guestvm: %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	if err := os.Rename(filepath.Join(x, "boot", "vmlinuz-"+rel), filepath.Join(x, "vmlinuz")); err != nil {
		return Kernel{}, fmt.Errorf("guestvm: %s has no kernel image: %w", pkg, err)
	}
	if err := os.WriteFile(filepath.Join(x, "ok"), []byte(pkg+"\n"), 0o644); err != nil {
		return Kernel{}, err
	}
	os.RemoveAll(k.Dir)
	if err := os.Rename(x, k.Dir); err != nil {
		return Kernel{}, err
	}
	return k, nil
}

// need says which package to install for a missing command.
func need(cmd, pkg string) error {
	if _, err := exec.LookPath(cmd); err != nil {
		return fmt.Errorf("%w: %s is not installed: apt-get install %s", ErrMissing, cmd, pkg)
	}
	return nil
}

// kernelPackage names the Debian package for want (see FetchKernel).
func kernelPackage(ctx context.Context, want string) (string, error) {
	if release.MatchString(want) {
		return "linux-image-" + want, nil
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+$`).MatchString(want) {
		return "", fmt.Errorf("guestvm: kernel %q is neither a series (6.1) nor a release (6.1.0-56-amd64)", want)
	}
	pattern := `^linux-image-` + regexp.QuoteMeta(want) + `\.0-[0-9]+-amd64$`
	search := func() []string {
		out, _ := exec.CommandContext(ctx, "apt-cache", "search", "--names-only", pattern).Output()
		var names []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				names = append(names, f[0])
			}
		}
		return names
	}
	names := search()
	if len(names) == 0 {
		if out, err := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); err != nil {
			return "", fmt.Errorf("guestvm: apt-get update: %v: %s", err, out)
		}
		names = search()
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%w: apt knows no package linux-image-%s.0-*-amd64: Debian 12's sources (bookworm, bookworm-security) in /etc/apt/sources.list carry Linux 6.1; add them and run apt-get update", ErrMissing, want)
	}
	sort.Slice(names, func(i, j int) bool { return abi(names[i]) < abi(names[j]) })
	return names[len(names)-1], nil
}

// abi is the ABI number of a package linux-image-X.Y.Z-ABI-amd64.
func abi(pkg string) int {
	f := strings.Split(pkg, "-")
	if len(f) < 4 {
		return 0
	}
	n, _ := strconv.Atoi(f[len(f)-2])
	return n
}

// Check says what the harness needs that this machine lacks, and how to get it: QEMU with its
// 9p device, and Debian's package tools (apt-get, dpkg-deb) with kmod's depmod.
func Check(ctx context.Context) error {
	for _, t := range [][2]string{{"qemu-system-x86_64", "qemu-system-x86"}, {"apt-get", "apt"}, {"dpkg-deb", "dpkg"}, {"depmod", "kmod"}} {
		if err := need(t[0], t[1]); err != nil {
			return err
		}
	}
	out, _ := exec.CommandContext(ctx, "qemu-system-x86_64", "-device", "help").Output()
	if !strings.Contains(string(out), "virtio-9p-pci") {
		return fmt.Errorf("%w: this qemu-system-x86_64 has no virtio-9p-pci device (the guest's root is the host's, over 9p): install Debian's qemu-system-x86", ErrMissing)
	}
	return nil
}
