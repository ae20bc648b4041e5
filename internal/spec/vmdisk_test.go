package spec

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestVMDisk checks `vm: {disk: ...}`: a qcow2 image or a raw disk, relative to the topology
// file; other files, a kernel beside it and the agent's keys are refused with file, line and field.
func TestVMDisk(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"d.qcow2":  qcow2Image(3, 0, 0),
		"b.qcow2":  qcow2Image(3, 0x200, 0),
		"x.qcow2":  qcow2Image(3, 0, qcow2ExternalData),
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
		want *VMSettings // nil: errors
		errs []string
	}{
		{"qcow2", "    vm: {disk: d.qcow2}\n", &VMSettings{Disk: filepath.Join(dir, "d.qcow2"), DiskFormat: "qcow2"}, nil},
		{"raw, absolute", "    vm: {disk: " + filepath.Join(dir, "d.raw") + "}\n", &VMSettings{Disk: filepath.Join(dir, "d.raw"), DiskFormat: "raw"}, nil},
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
			n, err := Parse(topo, []byte(head+c.body))
			if c.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := n.Nodes[0].VM; !reflect.DeepEqual(got, c.want) || got.Agent() {
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
	copy(b, qcow2Magic)
	binary.BigEndian.PutUint32(b[qcow2VersionOffset:], version)
	binary.BigEndian.PutUint64(b[qcow2BackingOffset:], backing)
	if version == 3 {
		binary.BigEndian.PutUint64(b[qcow2Incompatible:], incompatible)
	}
	return b
}
