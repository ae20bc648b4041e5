package state

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
)

// A state directory trellis makes, and all it writes there, are for root alone.
func TestStatePrivate(t *testing.T) {
	t.Setenv("TRELLIS_UID_REGISTRY", filepath.Join(t.TempDir(), "registry"))
	dir := filepath.Join(t.TempDir(), "st")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&Record{Name: "n", Plan: &plan.Plan{Network: "n"}}); err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock("n")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	unlock, err = s.LockMachine()
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if err := s.MarkChanging("n"); err != nil {
		t.Fatal(err)
	}
	base, err := s.AllocUIDs("n", func() (map[uint32]bool, error) { return map[uint32]bool{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	registry := UIDRegistryDir()
	want := map[string]fs.FileMode{
		dir: DirMode, s.path("n"): FileMode, s.lockPath("n"): FileMode, s.markPath("n"): FileMode,
		filepath.Join(dir, "id"): FileMode, filepath.Join(dir, "machine.lock"): FileMode,
		filepath.Join(dir, "networks"): DirMode, filepath.Join(dir, "logs"): DirMode,
		filepath.Join(dir, "uids"): DirMode, s.uidPath("n"): FileMode,
		registry: DirMode, filepath.Join(registry, "lock"): FileMode,
		filepath.Join(registry, strconv.FormatUint(uint64(base), 10)): FileMode,
	}
	checkModes(t, want)
}

// A state directory an older trellis made (0755, records 0644) is tightened where trellis
// made things; one that existed before trellis keeps its own mode; a record written again is
// a new file of mode 0600, even over a leftover temporary file of mode 0644.
func TestStatePrivateExisting(t *testing.T) {
	t.Setenv("TRELLIS_UID_REGISTRY", filepath.Join(t.TempDir(), "registry"))
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"networks", "logs", "logs/n", "uids", "vm", "engines", "bench", "other"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"id", "networks/n.json", "networks/n.json.tmp", "logs/n/a.log", "other.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&Record{Name: "n", Plan: &plan.Plan{Network: "n"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{dir: 0o755, filepath.Join(dir, "id"): FileMode, s.path("n"): FileMode,
		filepath.Join(dir, "other"): 0o755, filepath.Join(dir, "other.txt"): 0o644}
	for _, d := range ownDirs {
		want[filepath.Join(dir, d)] = DirMode
	}
	checkModes(t, want)
}

func checkModes(t *testing.T, want map[string]fs.FileMode) {
	t.Helper()
	for path, mode := range want {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		} else if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
}
