package noderuntime

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/trellisnet/trellis/internal/pkgfiles"
	"github.com/trellisnet/trellis/internal/testkit"
)

// The copy of a host's /etc keeps what any unprivileged user may read and the files packages
// installed unchanged, and nothing else, whoever owns it.
func TestEtcTemplate(t *testing.T) {
	testkit.RequireRoot(t) // to give files owners
	src := t.TempDir()
	files := []struct {
		path     string
		mode     fs.FileMode
		uid, gid int
		want     bool
	}{
		{"passwd", 0o644, 0, 0, true},
		{"shadow", 0o640, 0, 42, false},
		{"service.key", 0o600, 100, 100, false},         // a service's secret (rndc, etcd)
		{"service.conf", 0o640, 0, 100, false},          // for the service's group only
		{"public.conf", 0o644, 100, 100, true},          // a service's, readable by anyone
		{"changed.conf", 0o644, 0, 0, true},             // a conffile changed, but public
		{"frr", fs.ModeDir | 0o750, 101, 104, true},     // holds what is copied
		{"frr/daemons", 0o640, 101, 104, true},          // as its package installed it (dpkg)
		{"frr/vtysh.conf", 0o640, 101, 104, true},       // as its package installed it (ucf)
		{"frr/frr.conf", 0o640, 101, 104, false},        // a conffile the administrator changed
		{"frr/readable.conf", 0o644, 101, 104, false},   // in a directory others may not enter
		{"bird", fs.ModeDir | 0o750, 102, 105, false},   // holds nothing copied
		{"bird/bird.conf", 0o640, 102, 105, false},      // not a package's
		{"secret", fs.ModeDir | 0o700, 100, 100, false}, // a service's own directory
		{"secret/readable", 0o644, 100, 100, false},     // in it
		{"ssl", fs.ModeDir | 0o755, 0, 0, true},         // traversable: copied, even empty
		{"ssl/private", fs.ModeDir | 0o710, 0, 110, false},
		{"ssl/private/key.pem", 0o600, 0, 0, false},
		{"wide", fs.ModeDir | 0o755, 0, 70000, false}, // group beyond the range
		{"beyond", 0o644, 70000, 0, false},            // owner beyond the range
	}
	for _, f := range files {
		makeEntry(t, src, f.path, f.mode, f.uid, f.gid)
	}
	if err := os.Symlink("passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../passwd", filepath.Join(src, "frr", "link")); err != nil {
		t.Fatal(err)
	}
	// dpkg and ucf record the packages' sums of frr/daemons, frr/frr.conf (since changed),
	// frr/vtysh.conf and changed.conf; makeEntry writes each file's path as its contents.
	sum := func(contents string) string { s := md5.Sum([]byte(contents)); return hex.EncodeToString(s[:]) }
	status := fmt.Sprintf("Package: frr\nStatus: install ok installed\nConffiles:\n %s %s\n %s %s\n %s %s obsolete\nDescription: x\n y\n",
		filepath.Join(src, "frr/daemons"), sum("frr/daemons"), filepath.Join(src, "frr/frr.conf"), sum("stock frr.conf"),
		filepath.Join(src, "changed.conf"), sum("stock"))
	hashes := fmt.Sprintf("%s  %s\n", sum("frr/vtysh.conf"), filepath.Join(src, "frr/vtysh.conf"))
	standIn(t, &pkgfiles.DpkgStatus, status)
	standIn(t, &pkgfiles.UCFHashes, hashes)

	const base = 1 << 20
	dst, release, err := EtcTemplate(src, base)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, f := range files {
		fi, err := os.Lstat(filepath.Join(dst, f.path))
		if (err == nil) != f.want {
			t.Errorf("%s (%v %d:%d): copied = %v, want %v", f.path, f.mode, f.uid, f.gid, err == nil, f.want)
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
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "passwd" {
		t.Errorf("a link in /etc: %q, %v; want it copied", target, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "frr", "link")); err == nil {
		t.Error("a link in a directory others may not enter was copied")
	}
	if data, err := os.ReadFile(filepath.Join(dst, "frr", "daemons")); err != nil || string(data) != "frr/daemons" {
		t.Errorf("frr/daemons: %q, %v", data, err)
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

// standIn points *file at a temporary file holding contents until the test ends.
func standIn(t *testing.T, file *string, contents string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), filepath.Base(*file))
	if err := os.WriteFile(path, []byte(contents), 0o644); err != nil {
		t.Fatal(err)
	}
	old := *file
	*file = path
	t.Cleanup(func() { *file = old })
}

// A template nobody holds is closed after templateIdle; one held is kept.
func TestEtcTemplateIdle(t *testing.T) {
	testkit.RequireRoot(t) // to mount a tmpfs
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
