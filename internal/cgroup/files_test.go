package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// writeFiles writes n files f0..f(n-1) holding "value i\n" and returns their paths.
func writeFiles(t *testing.T, n int) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("value %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestFileCacheReadsAgainThroughOneDescriptor(t *testing.T) {
	paths := writeFiles(t, 1)
	c := newFileCache(4)
	before := openFDs(t)
	for i, want := range []string{"value 0", "changed"} {
		if i == 1 { // a counter that moved: written in place, as the kernel prints it afresh
			if err := os.WriteFile(paths[0], []byte("changed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.read(paths[0])
		if err != nil || got != want {
			t.Fatalf("read %d: %q, %v; want %q", i, got, err, want)
		}
		if c.open() != 1 || openFDs(t) != before+1 {
			t.Fatalf("read %d: %d kept, %d descriptors (had %d); want one kept", i, c.open(), openFDs(t), before)
		}
	}
	c.closeAll()
	if c.open() != 0 || openFDs(t) != before {
		t.Errorf("after closeAll: %d kept, %d descriptors, want 0 and %d", c.open(), openFDs(t), before)
	}
}

func TestFileCacheBounds(t *testing.T) {
	cases := []struct {
		max   int
		reads []int // files read, in order
		kept  []int // files kept at the end
	}{
		{2, []int{0, 1, 2}, []int{1, 2}},
		{2, []int{0, 1, 0, 2}, []int{0, 2}}, // 0 was used after 1: 1 goes
		{3, []int{0, 1, 2, 3, 4}, []int{2, 3, 4}},
		{1, []int{0, 0, 0}, []int{0}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.max, tc.reads), func(t *testing.T) {
			paths := writeFiles(t, 5)
			c := newFileCache(tc.max)
			defer c.closeAll()
			before := openFDs(t)
			for _, i := range tc.reads {
				if got, err := c.read(paths[i]); err != nil || got != fmt.Sprintf("value %d", i) {
					t.Fatalf("read f%d: %q, %v", i, got, err)
				}
			}
			if c.open() != len(tc.kept) || openFDs(t) != before+len(tc.kept) {
				t.Errorf("%d kept, %d new descriptors; want %d", c.open(), openFDs(t)-before, len(tc.kept))
			}
			for _, i := range tc.kept {
				if c.files[paths[i]] == nil {
					t.Errorf("f%d not kept", i)
				}
			}
		})
	}
}

// TestFileCacheGroupGone: a read that says the group is gone (ENODEV, as the kernel answers on
// a descriptor of a removed group) closes the descriptor and opens the file again once (a group
// made again under the same name); if that fails too, the error wraps ErrGone.
func TestFileCacheGroupGone(t *testing.T) {
	cases := []struct {
		name      string
		failReads int // reads that fail with ENODEV
		err       error
		want      string
	}{
		{"group made again", 1, nil, "value 0"},
		{"group gone", 2, ErrGone, ""},
		{"other error", 0, nil, "value 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			paths := writeFiles(t, 1)
			c := newFileCache(4)
			defer c.closeAll()
			if _, err := c.read(paths[0]); err != nil {
				t.Fatal(err)
			}
			first := c.files[paths[0]].fd
			fails := 0
			c.pread = func(fd int) ([]byte, error) {
				if fails < tc.failReads {
					fails++
					return nil, unix.ENODEV
				}
				return preadAll(fd)
			}
			before := openFDs(t)
			got, err := c.read(paths[0])
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || got != tc.want {
				t.Fatalf("read: %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
			kept := c.files[paths[0]]
			switch {
			case tc.err != nil && (kept != nil || openFDs(t) != before-1):
				t.Errorf("a gone group's file is still kept (%v), descriptors %d, had %d", kept, openFDs(t), before)
			case tc.err == nil && tc.failReads > 0 && (kept == nil || openFDs(t) != before):
				t.Errorf("after the group was made again: kept %v, descriptors %d, had %d", kept, openFDs(t), before)
			case tc.failReads == 0 && kept.fd != first:
				t.Errorf("a good read opened the file again")
			}
		})
	}
}

func TestFileCacheEvictsIdleAndRemovedGroups(t *testing.T) {
	paths := writeFiles(t, 3)
	c := newFileCache(8)
	defer c.closeAll()
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	c.read(paths[0])
	now = now.Add(idleTTL / 2)
	c.read(paths[1])
	now = now.Add(idleTTL/2 + time.Second) // paths[0] idle past idleTTL, paths[1] not
	c.read(paths[2])
	if c.files[paths[0]] != nil || c.files[paths[1]] == nil || c.open() != 2 {
		t.Errorf("after idleTTL: kept %v, want f1 and f2", c.files)
	}
	now = now.Add(idleTTL / 2) // f1 idle past idleTTL, f2 not
	c.tick()                   // no read comes: the timer sweeps
	if c.files[paths[1]] != nil || c.files[paths[2]] == nil {
		t.Errorf("after the timer's sweep: kept %v, want f2", c.files)
	}
	c.evictDir(filepath.Dir(paths[0]))
	if c.open() != 0 {
		t.Errorf("after evictDir: %d kept", c.open())
	}
	c.tick()
	if c.timer != nil {
		t.Errorf("the timer goes on with nothing kept")
	}
}

// TestFileCacheConcurrent reads, evicts and bounds from many goroutines at once (run with
// -race): every read gets its file's content, and no descriptor is left open or closed twice.
func TestFileCacheConcurrent(t *testing.T) {
	paths := writeFiles(t, 16)
	c := newFileCache(5)
	before := openFDs(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := (i*7 + g) % len(paths)
				if i%50 == 0 {
					c.evictDir(filepath.Dir(paths[0]))
				}
				if got, err := c.read(paths[k]); err != nil || got != fmt.Sprintf("value %d", k) {
					errs <- fmt.Errorf("read f%d: %q, %v", k, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c.open() > 5 {
		t.Errorf("%d kept, bound 5", c.open())
	}
	c.closeAll()
	if n := openFDs(t); n != before {
		t.Errorf("%d descriptors after closeAll, had %d", n, before)
	}
}
