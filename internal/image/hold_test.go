package image

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeImages makes n image directories in cache, the first the newest.
func fakeImages(t *testing.T, cache string, n int) []string {
	t.Helper()
	var dirs []string
	for i := range n {
		img := Image{ID: string(rune('a' + i)), Built: time.Now().Add(-time.Duration(i) * time.Hour)}
		dir := filepath.Join(cache, "images", img.ID)
		data, _ := json.Marshal(img)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "image.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// lockShared holds dir as another trellis would: its own open directory, a shared lock.
func lockShared(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
}

func TestPruneLeavesHeldImages(t *testing.T) {
	cache := t.TempDir()
	dirs := fakeImages(t, cache, 6)
	lockShared(t, dirs[4])                // another process boots the second oldest
	if err := hold(dirs[5]); err != nil { // this process the oldest
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, ok := held.LoadAndDelete(dirs[5]); ok {
			f.(*os.File).Close()
		}
	})
	prune(cache, 3)
	for i, want := range []bool{true, true, true, false, true, true} {
		if got := exists(dirs[i]); got != want {
			t.Errorf("image %d of 6 (newest first): there %v, want %v", i, got, want)
		}
	}
	if err := Remove(cache, "e"); !errors.Is(err, ErrInUse) {
		t.Errorf("Remove of an image another process holds: %v, want ErrInUse", err)
	}
	if err := Remove(cache, "f"); !errors.Is(err, ErrInUse) {
		t.Errorf("Remove of an image this process holds: %v, want ErrInUse", err)
	}
	if err := Remove(cache, "a"); err != nil || exists(dirs[0]) {
		t.Errorf("Remove of an image nobody holds: %v (still there: %v)", err, exists(dirs[0]))
	}
}

func TestHoldRemovedImage(t *testing.T) {
	cache := t.TempDir()
	dirs := fakeImages(t, cache, 1)
	os.RemoveAll(dirs[0])
	if err := hold(dirs[0]); !errors.Is(err, ErrNoImage) {
		t.Errorf("hold of a removed image: %v, want ErrNoImage", err)
	}
}
