package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestVMBoot checks `vm: {kernel, initrd, append}`: paths resolved against the topology file's
// directory, files that must exist and be regular, and the agent's keys refused with an initrd.
func TestVMBoot(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"vmlinuz", "initrd.img"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	topo := filepath.Join(dir, "topo.yaml")
	head := "name: t\nnodes:\n  r1:\n    kind: vm\n"
	cases := []struct {
		name string
		body string
		want *VMSettings // nil: errors
		errs []string
	}{
		{"relative kernel, trellis's initramfs", "    vm: {kernel: vmlinuz, append: \"nokaslr\"}\n    exec: [true]\n",
			&VMSettings{Kernel: filepath.Join(dir, "vmlinuz"), Append: "nokaslr"}, nil},
		{"absolute kernel and initrd", "    vm: {kernel: " + filepath.Join(dir, "vmlinuz") + ", initrd: initrd.img}\n",
			&VMSettings{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}, nil},
		{"missing kernel", "    vm: {kernel: nope}\n", nil,
			[]string{":5: nodes.r1.vm.kernel: cannot use " + filepath.Join(dir, "nope") + ": stat " + filepath.Join(dir, "nope") + ": no such file or directory; give the path of an existing file, absolute or relative to the topology file"}},
		{"directory as initrd", "    vm: {kernel: vmlinuz, initrd: sub}\n", nil,
			[]string{":5: nodes.r1.vm.initrd: " + filepath.Join(dir, "sub") + " is not a regular file; give the path of a file, not of a directory or device"}},
		{"initrd without kernel", "    vm: {initrd: initrd.img}\n", nil,
			[]string{":5: nodes.r1.vm.initrd: an initrd without a kernel; give the kernel it boots with `kernel:`, or remove `initrd:`"}},
		{"agent keys with the user's initrd", "    vm: {kernel: vmlinuz, initrd: initrd.img}\n    exec: [true]\n    sysctl: {net.ipv4.ip_forward: 0}\n", nil,
			[]string{
				":6: nodes.r1.exec: a VM booted from the user's own initrd or disk has no trellis agent to apply `exec`; configure the guest in its own image and remove `exec`, or drop `vm.initrd` or `vm.disk` to use trellis's initramfs",
				":7: nodes.r1.sysctl: a VM booted from the user's own initrd or disk has no trellis agent to apply `sysctl`; configure the guest in its own image and remove `sysctl`, or drop `vm.initrd` or `vm.disk` to use trellis's initramfs",
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := Parse(topo, []byte(head+c.body))
			if c.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := n.Nodes[0].VM; !reflect.DeepEqual(got, c.want) {
					t.Errorf("VM = %+v, want %+v", got, c.want)
				}
				return
			}
			wantErrors(t, err, topo, c.errs)
		})
	}
}

func TestVMAgent(t *testing.T) {
	cases := []struct {
		s    *VMSettings
		want bool
	}{{nil, true}, {&VMSettings{Kernel: "/k"}, true}, {&VMSettings{Kernel: "/k", Initrd: "/i"}, false}}
	for _, c := range cases {
		if got := c.s.Agent(); got != c.want {
			t.Errorf("%+v.Agent() = %v, want %v", c.s, got, c.want)
		}
	}
}

// wantErrors checks that err is a spec.Errors whose messages, without the file name topo, are
// want in order.
func wantErrors(t *testing.T, err error, topo string, want []string) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v, want spec.Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, strings.TrimPrefix(e.Error(), topo))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}
