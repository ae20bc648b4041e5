package oci

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// An image in use is never removed. Two things make it in use: a trellis process that got it
// (an up between pulling it and starting its nodes, a serve) holds its directory with a
// shared flock until it exits, as guest images are held (internal/image/hold.go); and a
// running node whose root it is: its init's root directory (/proc/PID/root) is the image's
// tree. Remove and Prune take the lock exclusively without waiting, then look for such nodes.

// ErrInUse is returned when an image to remove is in use.
var ErrInUse = errors.New("in use")

// held maps the image directories this process holds to their open directories.
var held sync.Map

func (s Store) hold(img Image) error {
	if _, ok := held.Load(img.Dir); ok {
		return nil
	}
	f, err := os.Open(img.Dir)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.ID, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return err
	}
	if _, err := os.Stat(filepath.Join(img.Dir, metaFile)); err != nil { // removed meanwhile
		f.Close()
		return fmt.Errorf("image %s: %w (removed meanwhile)", img.ID, ErrNoImage)
	}
	if _, loaded := held.LoadOrStore(img.Dir, f); loaded {
		f.Close()
	}
	return nil
}

// Remove deletes the image ref names (a reference or an ID) unless it is in use.
func (s Store) Remove(ref string) error {
	img, err := s.Find(ref)
	if err != nil {
		return err
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return s.remove(img)
}

// Prune removes every image not in use and what an interrupted unpack left; it returns the
// images removed.
func (s Store) Prune() ([]Image, error) {
	imgs, err := s.List()
	if err != nil || len(imgs) == 0 {
		return nil, err
	}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []Image
	for _, img := range imgs {
		if err := s.remove(img); err == nil {
			out = append(out, img)
		} else if !errors.Is(err, ErrInUse) {
			return out, err
		}
	}
	left, _ := filepath.Glob(filepath.Join(s.Dir, ".unpack-*"))
	more, _ := filepath.Glob(filepath.Join(s.Dir, ".import-*"))
	for _, d := range append(left, more...) {
		os.RemoveAll(d) // the store's lock is held: no unpack is under way
	}
	return out, nil
}

func (s Store) remove(img Image) error {
	if _, ok := held.Load(img.Dir); ok {
		return fmt.Errorf("image %s: %w by this trellis", img.ID[:12], ErrInUse)
	}
	f, err := os.Open(img.Dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("image %s: %w by a running trellis (an up starting nodes from it, or a serve)", img.ID[:12], ErrInUse)
		}
		return err
	}
	if pids := NodesUsing(img.Root()); len(pids) > 0 {
		return fmt.Errorf("image %s: %w by %d running node(s) (init pid %d): take their networks down first", img.ID[:12], ErrInUse, len(pids), pids[0])
	}
	// The record first: a removal cut short leaves a directory List ignores and prune removes.
	if err := os.Remove(filepath.Join(img.Dir, metaFile)); err != nil {
		return err
	}
	return os.RemoveAll(img.Dir)
}

// NodesUsing returns the pids of the node inits (package node's trellis-node processes)
// whose root directory is root.
func NodesUsing(root string) []int {
	var want unix.Stat_t
	if unix.Stat(root, &want) != nil {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, p := range procs {
		var pid int
		if _, err := fmt.Sscanf(p.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(cmd, []byte("trellis-node\x00")) {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", p.Name(), "root"), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			out = append(out, pid)
		}
	}
	return out
}

// ShortID is the first 12 hex digits of an image ID, as `trellis image ls` shows it.
func ShortID(id string) string { return strings.TrimPrefix(id, "sha256:")[:min(12, len(id))] }
