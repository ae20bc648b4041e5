package vm

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

// The tests of the kind's own settings (`vm:`), read through spec.Parse: the spec layer calls
// the kind's parser (settings.go) for the node's `vm:` key.

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
		want *Settings // nil: errors
		errs []string
	}{
		{"relative kernel, trellis's initramfs", "    vm: {kernel: vmlinuz, append: \"nokaslr\"}\n    exec: [true]\n",
			&Settings{Kernel: filepath.Join(dir, "vmlinuz"), Append: "nokaslr"}, nil},
		{"absolute kernel and initrd", "    vm: {kernel: " + filepath.Join(dir, "vmlinuz") + ", initrd: initrd.img}\n",
			&Settings{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}, nil},
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
			n, err := spec.Parse(topo, []byte(head+c.body))
			if c.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := knobs(n.Nodes[0]); !reflect.DeepEqual(got, c.want) {
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
		s    *Settings
		want bool
	}{{nil, true}, {&Settings{Kernel: "/k"}, true}, {&Settings{Kernel: "/k", Initrd: "/i"}, false}}
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
	var es spec.Errors
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

// TestVMDisk checks `vm: {disk: ...}`: a qcow2 image or a raw disk, relative to the topology
// file; other files, a kernel beside it and the agent's keys are refused with file, line and field.
func TestVMDisk(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"d.qcow2":  qcow2Image(3, 0, 0),
		"b.qcow2":  qcow2Image(3, 0x200, 0),
		"x.qcow2":  qcow2Image(3, 0, 1<<2),
		"v2.qcow2": qcow2Image(2, 0x200, 0),
		"d.raw":    make([]byte, 1<<20),
		"notes":    []byte("hello\n"),
		"empty":    nil,
		"vmlinuz":  []byte("x"),
		"initrd.i": []byte("x"),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topo := filepath.Join(dir, "topo.yaml")
	head := "name: t\nnodes:\n  r1:\n    kind: vm\n"
	cases := []struct {
		name string
		body string
		want *Settings // nil: errors
		errs []string
	}{
		{"qcow2", "    vm: {disk: d.qcow2}\n", &Settings{Disk: filepath.Join(dir, "d.qcow2"), DiskFormat: "qcow2"}, nil},
		{"raw, absolute", "    vm: {disk: " + filepath.Join(dir, "d.raw") + "}\n", &Settings{Disk: filepath.Join(dir, "d.raw"), DiskFormat: "raw"}, nil},
		{"missing", "    vm: {disk: nope.img}\n", nil,
			[]string{":5: nodes.r1.vm.disk: cannot use " + filepath.Join(dir, "nope.img") + ": stat " + filepath.Join(dir, "nope.img") + ": no such file or directory; give the path of an existing file, absolute or relative to the topology file"}},
		{"not a disk", "    vm: {disk: notes}\n", nil,
			[]string{":5: nodes.r1.vm.disk: " + filepath.Join(dir, "notes") + ": not a disk image: not qcow2, and its 6 bytes are not whole 512-byte sectors of a raw disk; give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)"}},
		{"empty", "    vm: {disk: empty}\n", nil,
			[]string{":5: nodes.r1.vm.disk: " + filepath.Join(dir, "empty") + ": not a disk image: not qcow2, and its 0 bytes are not whole 512-byte sectors of a raw disk; give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)"}},
		{"qcow2 with a backing file", "    vm: {disk: b.qcow2}\n", nil,
			[]string{":5: nodes.r1.vm.disk: " + filepath.Join(dir, "b.qcow2") + ": a qcow2 image with a backing file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`); give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)"}},
		{"qcow2 v2 with a backing file", "    vm: {disk: v2.qcow2}\n", nil,
			[]string{":5: nodes.r1.vm.disk: " + filepath.Join(dir, "v2.qcow2") + ": a qcow2 image with a backing file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`); give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)"}},
		{"qcow2 with an external data file", "    vm: {disk: x.qcow2}\n", nil,
			[]string{":5: nodes.r1.vm.disk: " + filepath.Join(dir, "x.qcow2") + ": a qcow2 image with an external data file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`); give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)"}},
		{"with a kernel", "    vm: {disk: d.raw, kernel: vmlinuz}\n", nil,
			[]string{":5: nodes.r1.vm.kernel: a VM with its own disk boots the kernel on the disk; remove `kernel`, or `disk` to boot a kernel"}},
		{"with exec", "    vm: {disk: d.qcow2}\n    exec: [true]\n", nil,
			[]string{":6: nodes.r1.exec: a VM booted from the user's own initrd or disk has no trellis agent to apply `exec`; configure the guest in its own image and remove `exec`, or drop `vm.initrd` or `vm.disk` to use trellis's initramfs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := spec.Parse(topo, []byte(head+c.body))
			if c.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := knobs(n.Nodes[0]); !reflect.DeepEqual(got, c.want) || got.Agent() {
					t.Errorf("VM = %+v (agent %v), want %+v without an agent", got, got.Agent(), c.want)
				}
				return
			}
			wantErrors(t, err, topo, c.errs)
		})
	}
}

// qcow2Image is the header of a qcow2 image of that version, backing file offset and
// incompatible features, padded to a cluster.
func qcow2Image(version uint32, backing, incompatible uint64) []byte {
	b := make([]byte, 512)
	copy(b, "QFI\xfb")
	binary.BigEndian.PutUint32(b[4:], version)
	binary.BigEndian.PutUint64(b[8:], backing)
	if version == 3 {
		binary.BigEndian.PutUint64(b[72:], incompatible)
	}
	return b
}

// TestClusterVMPaths: in a cluster's file, a VM's kernel, initrd and disk are names of the image
// store, and a path is refused with the same message whether or not the file exists on the
// machine that parses it (the CLI, the placer or an agent), so that no error tells a tenant
// what a machine holds. Before, ParseCluster looked the paths up on the parsing machine.
func TestClusterVMPaths(t *testing.T) {
	dir := t.TempDir()
	exists := filepath.Join(dir, "d.qcow2")
	if err := os.WriteFile(exists, qcow2Image(3, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	head := "name: t\nnodes:\n  r1:\n    kind: vm\n    vm: "
	const msg = " is not an image name: in a cluster a VM's kernel, initrd and disk are images of the machines' image store, named without a path; " + spec.ImageFix
	cases := []struct{ name, vm, want string }{
		{"disk that exists", "{disk: " + exists + "}", `:5: nodes.r1.vm.disk: "` + exists + `"` + msg},
		{"disk that does not", "{disk: /nope/d.qcow2}", `:5: nodes.r1.vm.disk: "/nope/d.qcow2"` + msg},
		{"block device", "{disk: /dev/sda}", `:5: nodes.r1.vm.disk: "/dev/sda"` + msg},
		{"relative", "{disk: ../d.qcow2}", `:5: nodes.r1.vm.disk: "../d.qcow2"` + msg},
		{"kernel", "{kernel: /boot/vmlinuz}", `:5: nodes.r1.vm.kernel: "/boot/vmlinuz"` + msg},
		{"initrd", "{kernel: k, initrd: /etc/shadow}", `:5: nodes.r1.vm.initrd: "/etc/shadow"` + msg},
		{"hidden", "{disk: .d}", `:5: nodes.r1.vm.disk: ".d"` + msg},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.ParseCluster("/top/t.yaml", []byte(head+c.vm+"\n"), nil)
			wantErrors(t, err, "/top/t.yaml", []string{c.want})
		})
	}
	n, err := spec.ParseCluster("/top/t.yaml", []byte(head+"{disk: debian-12.qcow2}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := knobs(n.Nodes[0]); s.Disk != "debian-12.qcow2" || s.DiskFormat != "" || s.Agent() {
		t.Errorf("vm %+v, want the image's name, no format yet, and no agent", s)
	}
}

// TestUseImages resolves a cluster's image names in a machine's store, and refuses what is not
// there, not a file of the store, writable by others, or a qcow2 image that names another file.
func TestUseImages(t *testing.T) {
	store := t.TempDir()
	put := func(name string, body []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(store, name), body, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(store, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	put("flat.qcow2", qcow2Image(3, 0, 0), 0o644)
	put("raw.img", make([]byte, 4096), 0o600)
	put("backed.qcow2", qcow2Image(3, 0x200, 0), 0o644)
	put("open.qcow2", qcow2Image(3, 0, 0), 0o666)
	put("vmlinuz", []byte("k"), 0o644)
	if err := os.Symlink("/dev/sda", filepath.Join(store, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(store, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	head := "name: t\nnodes:\n  r1:\n    kind: vm\n    vm: "
	cases := []struct{ vm, want, format string }{
		{"{disk: flat.qcow2}", "", "qcow2"},
		{"{disk: raw.img}", "", "raw"},
		{"{kernel: vmlinuz}", "", ""},
		{"{disk: missing}", `image "missing": not in this machine's image store`, ""},
		{"{disk: backed.qcow2}", `image "backed.qcow2": a qcow2 image with a backing file`, ""},
		{"{disk: open.qcow2}", `image "open.qcow2": in this machine's image store, but not owned by root (the agent's user) or writable by others`, ""},
		{"{disk: link}", `image "link": not a regular file in this machine's image store`, ""},
		{"{disk: sub}", `image "sub": not a regular file in this machine's image store`, ""},
	}
	for _, c := range cases {
		t.Run(c.vm, func(t *testing.T) {
			n, err := spec.ParseCluster("/top/t.yaml", []byte(head+c.vm+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = n.UseImages(store)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), ":5: nodes.r1.vm.") || !strings.Contains(err.Error(), c.want) {
					t.Errorf("UseImages: %v, want an error naming the field and saying %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := knobs(n.Nodes[0])
			if path := s.Disk + s.Kernel; !strings.HasPrefix(path, store+"/") || s.DiskFormat != c.format {
				t.Errorf("vm %+v, want a path in the store and format %q", s, c.format)
			}
		})
	}
}

// TestParseSentVM: a file sent to the API names no path on the machine: a VM's kernel, initrd
// and disk are problems naming them, whether the path exists or not (spec's TestParseSent).
func TestParseSentVM(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	os.WriteFile(disk, make([]byte, 512), 0o644)
	cases := []struct {
		name, node, field, fix string
	}{
		{"a VM's kernel", "kind: vm\n    vm: {kernel: /boot/vmlinuz}", "nodes.a.vm.kernel", "remove it"},
		{"a VM's initrd", "kind: vm\n    vm: {kernel: /nonexistent/k, initrd: /nonexistent/i}", "nodes.a.vm.initrd", "remove it"},
		{"a VM's disk", "kind: vm\n    vm: {disk: " + disk + "}", "nodes.a.vm.disk", "remove it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := "name: x\nnodes:\n  a:\n    " + c.node + "\n"
			_, err := spec.ParseSent("sent.yaml", []byte(file), false)
			var errs spec.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("ParseSent: %v, want problems", err)
			}
			var found *spec.Error
			for _, e := range errs {
				if e.Field == c.field {
					found = e
				}
			}
			if found == nil || !strings.Contains(found.Msg, "path on the server's machine") || !strings.Contains(found.Fix, c.fix) ||
				strings.Contains(found.Msg, "no such file") {
				t.Errorf("problems %v, want one of %s saying it names a path on the server's machine, fix %q", errs, c.field, c.fix)
			}
			if _, err := spec.ParseSent("sent.yaml", []byte(file), true); err == nil {
				t.Errorf("a cluster's sent file takes %s", c.field)
			}
		})
	}
	// In a cluster a VM's kernel, initrd and disk are names of the machines' image store, not
	// paths: a sent file may give them (the agent resolves them in its store).
	n, err := spec.ParseSent("sent.yaml", []byte("name: x\nnodes:\n  a: {kind: vm, vm: {disk: debian.qcow2}}\n  b: {kind: vm, vm: {kernel: vmlinuz-6.1, initrd: initrd.img}}\n"), true)
	if err != nil || knobs(n.Node("a")).Disk != "debian.qcow2" {
		t.Errorf("a cluster's sent file with image names: %v", err)
	}
}

// TestSettingsErrors: what is wrong in `vm:` is reported at its line and field, every problem at
// once, in the words spec's tests held before the settings moved here.
func TestSettingsErrors(t *testing.T) {
	c := struct{ name, doc, want string }{"vm settings out of range", `name: t
nodes:
  r1:
    kind: vm
    vm:
      pin: {vcpu: [0, x], io: 1}
      priority: {vcpu: 100, cpu: 1}
      reserve: 150%
      queues: 0
      queue_size: 300
      interconnect: vhost
`, `topo.yaml:6: nodes.r1.vm.pin.vcpu: "x" is not a whole number from 0 to 1023; give CPU numbers as the kernel counts them, e.g. [0, 1]
topo.yaml:7: nodes.r1.vm.priority.cpu: unknown key; the keys allowed here are [vcpu io]
topo.yaml:7: nodes.r1.vm.priority.vcpu: "100" is not a whole number from 1 to 99; give a SCHED_FIFO priority from 1 to 99
topo.yaml:8: nodes.r1.vm.reserve: "150%" is not a share from 0 to 100%; write a share of a core with an optional period, e.g. ` + "`50%` or `35% 20ms`" + `
topo.yaml:9: nodes.r1.vm.queues: "0" is not a whole number from 1 to 16; give 1 to 16 queue pairs
topo.yaml:10: nodes.r1.vm.queue_size: 300 is not a power of two; give 256, 512 or 1024
topo.yaml:11: nodes.r1.vm.interconnect: "vhost" is not an interconnect; give tap, macvtap or bridge`}
	_, err := spec.Parse("topo.yaml", []byte(c.doc))
	if err == nil || err.Error() != c.want {
		t.Errorf("%s: errors\n%v\nwant\n%s", c.name, err, c.want)
	}
}

// TestRefusals: a VM node takes no rootfs and no image, and says why in the kind's words.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"dev", "etc", "proc", "run", "sys", "tmp"} { // a root file system
		os.MkdirAll(filepath.Join(dir, "root", d), 0o755)
	}
	topo := filepath.Join(dir, "topo.yaml")
	for _, c := range []struct{ body, want string }{
		{"    kind: vm\n    rootfs: root\n", ":5: nodes.r1.rootfs: a vm node boots its own disk, not a directory; remove `rootfs:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"},
		{"    kind: vm\n    image: alpine:3\n", ":5: nodes.r1.image: a vm node boots its own disk, not a container image; remove `image:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"},
	} {
		_, err := spec.Parse(topo, []byte("name: t\nnodes:\n  r1:\n"+c.body))
		wantErrors(t, err, topo, []string{c.want})
	}
}

// TestClusterDefaultMemory: in a cluster, a VM node without `memory:` counts the guest memory
// the kind gives it (its rule DefaultMemory), not a container's default limit.
func TestClusterDefaultMemory(t *testing.T) {
	n, err := spec.ParseCluster("/top/t.yaml", []byte("name: t\nnodes:\n  v: {kind: vm}\n  w: {kind: vm, memory: 1G}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Nodes[0].DefaultMemory; got != DefaultMemory {
		t.Errorf("default memory of a VM node %d, want %d", got, DefaultMemory)
	}
	if got := n.Nodes[1].DefaultMemory; got != 0 {
		t.Errorf("default memory of a VM node with memory: %d, want none", got)
	}
}
