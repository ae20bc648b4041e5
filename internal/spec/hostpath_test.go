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
	os.MkdirAll(filepath.Join(dir, "root"), 0o755)
	cases := []struct {
		name, node, field, fix string
	}{
		{"a source file", "files: [{path: /etc/x, source: /etc/shadow}]", "nodes.a.files[0].source", "content:"},
		{"a source file that is not there", "files: [{path: /etc/x, source: /nonexistent/x}]", "nodes.a.files[0].source", "content:"},
		{"a relative source file", "files: [{path: /etc/x, source: ../../etc/shadow}]", "nodes.a.files[0].source", "content:"},
		{"a root directory", "rootfs: " + dir + "/root", "nodes.a.rootfs", "remove `rootfs:`"},
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
}
