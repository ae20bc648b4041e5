package node

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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

func TestEtcTemplate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files owners")
	}
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "etc")
	files := []struct {
		path     string
		mode     fs.FileMode
		uid, gid int
	}{
		{"passwd", 0o644, 0, 0},
		{"shadow", 0o640, 0, 42},
		{"frr", fs.ModeDir | 0o750, 101, 104},
		{"frr/frr.conf", 0o640, 101, 104},
		{"ssl", fs.ModeDir | 0o755, 0, 0},
		{"ssl/private", fs.ModeDir | 0o710, 0, 110},
		{"ssl/private/key.pem", 0o600, 0, 0},
	}
	for _, f := range files {
		p := filepath.Join(src, f.path)
		var err error
		if f.mode.IsDir() {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, []byte(f.path), 0o600)
		}
		if err == nil {
			err = os.Chown(p, f.uid, f.gid)
		}
		if err == nil {
			err = os.Chmod(p, f.mode.Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	const base = 1 << 20
	if err := EtcTemplate(src, dst, base); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		fi, err := os.Lstat(filepath.Join(dst, f.path))
		want := copied(f.mode, uint32(f.uid), uint32(f.gid)) && f.path != "ssl/private/key.pem"
		if (err == nil) != want {
			t.Errorf("%s: copied = %v, want %v", f.path, err == nil, want)
			continue
		}
		if err != nil {
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != f.mode.Perm() || st.Uid != uint32(base+f.uid) || st.Gid != uint32(base+f.gid) {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", f.path, fi.Mode().Perm(), st.Uid, st.Gid, f.mode.Perm(), base+f.uid, base+f.gid)
		}
	}
	if err := EtcTemplate(src, dst, base); err != nil { // made already: kept
		t.Fatal(err)
	}
}
