package node

import (
	"io/fs"
	"testing"
)

func TestCopied(t *testing.T) {
	cases := []struct {
		what     string
		mode     fs.FileMode
		uid, gid uint32
		want     bool
	}{
		{"world-readable file", 0o644, 0, 0, true},
		{"shadow", 0o640, 0, 42, false},
		{"root's private key", 0o600, 0, 0, false},
		{"frr's configuration", 0o640, 101, 104, true},
		{"a person's file", 0o600, 1000, 1000, false},
		{"traversable directory", fs.ModeDir | 0o755, 0, 0, true},
		{"root's closed directory", fs.ModeDir | 0o710, 0, 110, false},
		{"frr's directory", fs.ModeDir | 0o750, 101, 104, true},
		{"symlink", fs.ModeSymlink | 0o777, 0, 0, true},
		{"owner beyond the range", 0o644, 70000, 0, false},
		{"group beyond the range", 0o644, 0, 70000, false},
	}
	for _, c := range cases {
		if got := copied(c.mode, c.uid, c.gid); got != c.want {
			t.Errorf("%s: copied = %v, want %v", c.what, got, c.want)
		}
	}
}
