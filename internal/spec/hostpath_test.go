package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseSent: a file sent to the API names no path on the machine. Each key that would is
// a problem naming it, whether the path exists or not (nothing on the disk is looked at),
// and the same file parses from the machine's own user.
func TestParseSent(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	os.WriteFile(disk, make([]byte, 512), 0o644)
	os.MkdirAll(filepath.Join(dir, "root"), 0o755)
	cases := []struct {
		name, node, field, fix string
	}{
		{"a source file", "files: [{path: /etc/x, source: /etc/shadow}]", "nodes.a.files[0].source", "content:"},
		{"a source file that is not there", "files: [{path: /etc/x, source: /nonexistent/x}]", "nodes.a.files[0].source", "content:"},
		{"a relative source file", "files: [{path: /etc/x, source: ../../etc/shadow}]", "nodes.a.files[0].source", "content:"},
		{"a root directory", "rootfs: " + dir + "/root", "nodes.a.rootfs", "remove `rootfs:`"},
		{"a VM's kernel", "kind: vm\n    vm: {kernel: /boot/vmlinuz}", "nodes.a.vm.kernel", "remove it"},
		{"a VM's initrd", "kind: vm\n    vm: {kernel: /nonexistent/k, initrd: /nonexistent/i}", "nodes.a.vm.initrd", "remove it"},
		{"a VM's disk", "kind: vm\n    vm: {disk: " + disk + "}", "nodes.a.vm.disk", "remove it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := "name: x\nnodes:\n  a:\n    " + c.node + "\n"
			_, err := ParseSent("sent.yaml", []byte(file), false)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("ParseSent: %v, want problems", err)
			}
			var found *Error
			for _, e := range errs {
				if e.Field == c.field {
					found = e
				}
			}
			if found == nil || !strings.Contains(found.Msg, "path on the server's machine") || !strings.Contains(found.Fix, c.fix) ||
				strings.Contains(found.Msg, "no such file") {
				t.Errorf("problems %v, want one of %s saying it names a path on the server's machine, fix %q", errs, c.field, c.fix)
			}
			if _, err := ParseSent("sent.yaml", []byte(file), true); err == nil {
				t.Errorf("a cluster's sent file takes %s", c.field)
			}
		})
	}
	if _, err := ParseSent("sent.yaml", []byte("name: x\nnodes:\n  a:\n    files: [{path: /etc/x, content: hello}]\n"), false); err != nil {
		t.Errorf("a sent file with content: %v", err)
	}
	// In a cluster a VM's kernel, initrd and disk are names of the machines' image store, not
	// paths: a sent file may give them (the agent resolves them in its store).
	n, err := ParseSent("sent.yaml", []byte("name: x\nnodes:\n  a: {kind: vm, vm: {disk: debian.qcow2}}\n  b: {kind: vm, vm: {kernel: vmlinuz-6.1, initrd: initrd.img}}\n"), true)
	if err != nil || n.Node("a").VM.Disk != "debian.qcow2" {
		t.Errorf("a cluster's sent file with image names: %v", err)
	}
}
