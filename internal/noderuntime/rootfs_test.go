package noderuntime

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// A rootfs's /etc is copied whole (it is the user's, not the host's), owners shifted into the
// network's range, those beyond the range given to the node's root.
func TestRootfsEtcTemplate(t *testing.T) {
	testkit.RequireRoot(t) // to give files owners
	rootfs := t.TempDir()
	files := []struct {
		path             string
		mode             fs.FileMode
		uid, gid         int
		wantUID, wantGID int // in the node
	}{
		{"etc", fs.ModeDir | 0o755, 0, 0, 0, 0},
		{"etc/passwd", 0o644, 0, 0, 0, 0},
		{"etc/shadow", 0o640, 0, 42, 0, 42},
		{"etc/ssl", fs.ModeDir | 0o755, 0, 0, 0, 0},
		{"etc/ssl/private", fs.ModeDir | 0o710, 0, 110, 0, 110},
		{"etc/ssl/private/key.pem", 0o600, 0, 0, 0, 0},
		{"etc/subuid-owned", 0o644, 100000, 100100, 0, 0},
	}
	for _, f := range files {
		makeEntry(t, rootfs, f.path, f.mode, f.uid, f.gid)
	}
	const base = 1 << 20
	dst, release, err := RootfsEtcTemplate(rootfs, base)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, f := range files {
		lstat := os.Lstat
		if f.path == "etc" {
			lstat = os.Stat // dst is a link to the copy's root
		}
		fi, err := lstat(filepath.Join(dst, f.path[len("etc"):]))
		if err != nil {
			t.Errorf("%s: not copied: %v", f.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != f.mode.Perm() || st.Uid != uint32(base+f.wantUID) || st.Gid != uint32(base+f.wantGID) {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", f.path, fi.Mode().Perm(), st.Uid, st.Gid, f.mode.Perm(), base+f.wantUID, base+f.wantGID)
		}
	}
}

// A rootfs whose etc is a symbolic link (which the copy would follow on the host) or missing
// is refused, and no template is made.
func TestRootfsEtcTemplateRefused(t *testing.T) {
	for name, etc := range map[string]func(string) error{
		"link to the host's /etc": func(root string) error { return os.Symlink("/etc", filepath.Join(root, "etc")) },
		"missing":                 func(string) error { return nil },
		"a file":                  func(root string) error { return os.WriteFile(filepath.Join(root, "etc"), nil, 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if err := etc(root); err != nil {
				t.Fatal(err)
			}
			n := len(templates.m)
			if _, _, err := RootfsEtcTemplate(root, 1<<20); !errors.Is(err, ErrRootfs) {
				t.Errorf("error %v, want ErrRootfs", err)
			}
			if len(templates.m) != n {
				t.Error("a template was made")
			}
		})
	}
}
