//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/testkit"
)

// ownInitrd writes an initramfs whose /init (busybox's shell) prints marker on the console and
// then waits: a guest with no trellis agent.
func ownInitrd(t *testing.T, path, marker string) {
	t.Helper()
	bb, err := os.ReadFile("/usr/bin/busybox")
	if err != nil {
		testkit.Skipf(t, "no busybox (%v): scripts/setup.sh installs busybox-static", err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := cpio.NewWriter(f)
	init := "#!/bin/sh\necho " + marker + "\nwhile :; do sleep 3600; done\n"
	for _, e := range []struct {
		name string
		mode cpio.FileMode
		body []byte
	}{
		{"bin", cpio.TypeDir | 0o755, nil},
		{"bin/busybox", 0o755, bb},
		{"bin/sh", cpio.TypeSymlink | 0o777, []byte("busybox")},
		{"bin/sleep", cpio.TypeSymlink | 0o777, []byte("busybox")},
		{"init", 0o755, []byte(init)},
	} {
		if err := w.WriteHeader(&cpio.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVMOwnInitrd brings up a VM node that boots the user's own kernel and initrd: `up` starts
// QEMU (no agent to wait for) and the guest's /init writes on the serial console log, while the
// image cache, which `up` would fill had it built the default image, stays empty.
func TestVMOwnInitrd(t *testing.T) {
	needQEMU(t)
	kernels, _ := filepath.Glob(filepath.Join(image.DefaultCache, "kernels", "*", "vmlinuz"))
	if len(kernels) == 0 {
		testkit.Skipf(t, "no guest kernel in %s: trellis image build fetches it (scripts/test.sh does)", image.DefaultCache)
	}
	cache := t.TempDir()
	t.Setenv(image.CacheEnv, cache)
	e := start(t)
	registerNetwork("vminitrd")
	path := writeTopo(t, `name: vminitrd
nodes:
  v:
    kind: vm
    memory: 256M
    vm: {kernel: `+kernels[0]+`, initrd: own.cpio}
`)
	marker := "trellis-own-initrd-" + nonce()
	ownInitrd(t, filepath.Join(filepath.Dir(path), "own.cpio"), marker)
	began := time.Now()
	mustTrellis(t, e.state, "up", path)
	if ls := mustTrellis(t, e.state, "ls"); !strings.Contains(ls, "vminitrd") || strings.Contains(ls, "not running") {
		t.Errorf("ls after up:\n%s", ls)
	}
	console := filepath.Join(e.state, "logs", "vminitrd", "v.console")
	for {
		data, _ := os.ReadFile(console)
		if strings.Contains(string(data), marker) {
			break
		}
		if time.Since(began) > 2*time.Minute {
			t.Fatalf("no %q on the console 2 min after up began; %s:\n%s", marker, console, data)
		}
		time.Sleep(time.Second)
	}
	t.Logf("the guest's /init wrote on the console %.1fs after up began", time.Since(began).Seconds())
	if left, _ := os.ReadDir(cache); len(left) > 0 {
		t.Errorf("up put %d entries in the image cache %s: it built an image no node boots", len(left), cache)
	}
	mustTrellis(t, e.state, "down", "vminitrd")
	e.assertClean()
}
