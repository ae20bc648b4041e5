package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	const msg = " is not an image name: in a cluster a VM's kernel, initrd and disk are images of the machines' image store, named without a path; " + imageFix
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
			_, err := ParseCluster("/top/t.yaml", []byte(head+c.vm+"\n"), nil)
			wantErrors(t, err, "/top/t.yaml", []string{c.want})
		})
	}
	n, err := ParseCluster("/top/t.yaml", []byte(head+"{disk: debian-12.qcow2}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := n.Nodes[0].VM; s.Disk != "debian-12.qcow2" || s.DiskFormat != "" || s.Agent() {
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
			n, err := ParseCluster("/top/t.yaml", []byte(head+c.vm+"\n"), nil)
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
			s := n.Nodes[0].VM
			if path := s.Disk + s.Kernel; !strings.HasPrefix(path, store+"/") || s.DiskFormat != c.format {
				t.Errorf("vm %+v, want a path in the store and format %q", s, c.format)
			}
		})
	}
}
