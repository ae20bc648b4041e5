package node

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A rootfs's /etc is copied whole (it is the user's, not the host's), owners shifted into the
// network's range, those beyond the range given to the node's root.
func TestRootfsEtcTemplate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files owners")
	}
	rootfs, dst := t.TempDir(), filepath.Join(t.TempDir(), "etc")
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
		p := filepath.Join(rootfs, f.path)
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
	if err := RootfsEtcTemplate(rootfs, dst, base); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		fi, err := os.Lstat(filepath.Join(dst, f.path[len("etc"):]))
		if err != nil {
			t.Errorf("%s: not copied: %v", f.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != f.mode.Perm() || st.Uid != uint32(base+f.wantUID) || st.Gid != uint32(base+f.wantGID) {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", f.path, fi.Mode().Perm(), st.Uid, st.Gid, f.mode.Perm(), base+f.wantUID, base+f.wantGID)
		}
	}
	if leftovers, _ := filepath.Glob(dst + ".tmp*"); len(leftovers) > 0 {
		t.Errorf("copies left beside the template: %v", leftovers)
	}
}

// A rootfs whose etc is a symbolic link (which the overlay would follow on the host) or
// missing is refused, and nothing is made.
func TestRootfsEtcTemplateRefused(t *testing.T) {
	for name, etc := range map[string]func(string) error{
		"link to the host's /etc": func(root string) error { return os.Symlink("/etc", filepath.Join(root, "etc")) },
		"missing":                 func(string) error { return nil },
		"a file":                  func(root string) error { return os.WriteFile(filepath.Join(root, "etc"), nil, 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			root, dst := t.TempDir(), filepath.Join(t.TempDir(), "etc")
			if err := etc(root); err != nil {
				t.Fatal(err)
			}
			if err := RootfsEtcTemplate(root, dst, 1<<20); !errors.Is(err, ErrRootfs) {
				t.Errorf("error %v, want ErrRootfs", err)
			}
			if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) > 0 {
				t.Errorf("made %v", entries)
			}
		})
	}
}
