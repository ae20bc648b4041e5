package node

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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
	src := t.TempDir()
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
		makeEntry(t, src, f.path, f.mode, f.uid, f.gid)
	}
	const base = 1 << 20
	dst, release, err := EtcTemplate(src, base)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
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
	again, release2, err := EtcTemplate(src, base) // held already: the same copy
	if err != nil {
		t.Fatal(err)
	}
	release2()
	if again != dst {
		t.Errorf("a second EtcTemplate of the same network gave %s, want the first's %s", again, dst)
	}
	if err := os.WriteFile(filepath.Join(dst, "probe"), nil, 0o644); err == nil {
		t.Error("the template can be written: want it read-only")
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dst, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
		t.Errorf("the template is not a tmpfs (%v, type %#x)", err, sfs.Type)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), src) {
		t.Errorf("the template is mounted in this mount namespace:\n%s", mounts)
	}
}

// A template nobody holds is closed after templateIdle; one held is kept.
func TestEtcTemplateIdle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "hosts"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	held, releaseHeld, err := EtcTemplate(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseHeld()
	idle, releaseIdle, err := EtcTemplate(src, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	releaseIdle()
	templates.Lock()
	for _, t := range templates.m {
		t.used = t.used.Add(-2 * templateIdle)
	}
	templates.Unlock()
	_, release, err := EtcTemplate(src, 3<<20) // sweeps the idle
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := os.Stat(filepath.Join(held, "hosts")); err != nil {
		t.Errorf("a held template was closed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(idle, "hosts")); err == nil {
		t.Error("an idle template was kept")
	}
}

// makeEntry makes path under root, a directory or a file holding its own path, with mode and
// owners uid and gid.
func makeEntry(t *testing.T, root, path string, mode fs.FileMode, uid, gid int) {
	t.Helper()
	p := filepath.Join(root, path)
	var err error
	if mode.IsDir() {
		err = os.Mkdir(p, 0o700)
	} else {
		err = os.WriteFile(p, []byte(path), 0o600)
	}
	if err == nil {
		err = os.Chown(p, uid, gid)
	}
	if err == nil {
		err = os.Chmod(p, mode.Perm())
	}
	if err != nil {
		t.Fatal(err)
	}
}
