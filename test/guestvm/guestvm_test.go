package guestvm

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestKernelPackage(t *testing.T) {
	for _, c := range []struct{ want, pkg, err string }{
		{want: "6.1.0-56-amd64", pkg: "linux-image-6.1.0-56-amd64"},
		{want: "6.1.0-56-rt-amd64", err: "neither a series"},
		{want: "latest", err: "neither a series"},
		{want: "6", err: "neither a series"},
	} {
		pkg, err := kernelPackage(context.Background(), c.want)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("kernelPackage(%q) = %q, %v; want an error with %q", c.want, pkg, err, c.err)
			}
		} else if err != nil || pkg != c.pkg {
			t.Errorf("kernelPackage(%q) = %q, %v; want %q", c.want, pkg, err, c.pkg)
		}
	}
}

func TestABI(t *testing.T) {
	names := []string{"linux-image-6.1.0-9-amd64", "linux-image-6.1.0-56-amd64", "linux-image-6.1.0-47-amd64"}
	slices.SortFunc(names, func(a, b string) int { return abi(a) - abi(b) })
	if names[2] != "linux-image-6.1.0-56-amd64" || names[0] != "linux-image-6.1.0-9-amd64" {
		t.Errorf("sorted by ABI: %v", names)
	}
}

func TestDefaultsAndArgs(t *testing.T) {
	c := Config{Argv: []string{"/bin/true"}, Env: []string{"PATH=/x"}, Init: "/bin/true"}
	err := c.defaults() // /bin/true is linked dynamically: refused as the guest's init
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamic init: %v, want a refusal naming CGO_ENABLED=0", err)
	}
	if c.Memory != "3G" || c.CPUs != 2 || c.Dir != "/" || !slices.Contains(c.Env, "HOME=/root") || slices.Contains(c.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		t.Errorf("defaults: %+v", c)
	}
	c.Kernel = Kernel{Dir: "/k", Release: "6.1.0-56-amd64"}
	args := strings.Join(c.qemuArgs("/w/initrd", "/w/results"), " ")
	for _, want := range []string{"-kernel /k/vmlinuz", "path=/,security_model=none,readonly=on", "mount_tag=hostroot", "path=/w/results,", "file:/w/results/console", "-accel tcg"} {
		if !strings.Contains(args, want) {
			t.Errorf("QEMU's arguments %q lack %q", args, want)
		}
	}
	if err := (&Config{}).defaults(); err == nil {
		t.Error("no command: no error")
	}
}

func TestNIC(t *testing.T) {
	c := Config{Argv: []string{"/bin/true"}, Init: "/bin/true", NIC: &NIC{Tap: "tap1", MAC: "52:54:00:12:00:01"}}
	if err := c.defaults(); err == nil || !strings.Contains(err.Error(), "a network card needs a tap, a MAC and an address") {
		t.Errorf("a card without an address: %v", err)
	}
	c.NIC.Address = "198.18.0.1/24"
	c.defaults()
	if c.Hostname != "guest" {
		t.Errorf("default host name %q", c.Hostname)
	}
	args := strings.Join(c.qemuArgs("/w/initrd", "/w/results"), " ")
	for _, want := range []string{"-netdev tap,id=ul,ifname=tap1,script=no,downscript=no", "-device virtio-net-pci,netdev=ul,mac=52:54:00:12:00:01"} {
		if !strings.Contains(args, want) {
			t.Errorf("QEMU's arguments %q lack %q", args, want)
		}
	}
}
