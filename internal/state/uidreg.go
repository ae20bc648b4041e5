package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The uid ranges of every state directory on the machine are registered in one directory,
// UIDRegistryDir, under one lock: two trellis processes with different state directories that
// allocate at the same moment (before either's nodes run, which is when busy would show them)
// never take the same range, and a range recorded by a network that is down (or whose nodes
// are gone after a reboot) stays its own. An entry is a file named by the range's first uid,
// holding the state directory and the network; an entry whose state directory no longer
// records that range for that network is stale and is taken again.

// DefaultUIDRegistryDir is UIDRegistryDir when TRELLIS_UID_REGISTRY does not name another.
const DefaultUIDRegistryDir = "/var/lib/trellis-uid-ranges"

// UIDRegistryDir returns the machine's uid range registry.
func UIDRegistryDir() string {
	if d := os.Getenv("TRELLIS_UID_REGISTRY"); d != "" {
		return d
	}
	return DefaultUIDRegistryDir
}

// lockRegistry takes the registry's lock, waiting for it if need be.
func lockRegistry() (func(), error) {
	dir := UIDRegistryDir()
	if err := makeDir(dir); err != nil {
		return nil, fmt.Errorf("uid range registry: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		return nil, fmt.Errorf("uid range registry: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("uid range registry: %w", err)
	}
	return func() { f.Close() }, nil
}

// registered adds to used the ranges that live entries of the registry hold.
func registered(used map[uint32]bool) error {
	entries, err := os.ReadDir(UIDRegistryDir())
	if err != nil {
		return fmt.Errorf("uid range registry: %w", err)
	}
	for _, e := range entries {
		base, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue // the lock, a temporary file
		}
		path := filepath.Join(UIDRegistryDir(), e.Name())
		if err := tighten(path, 0, FileMode); err != nil { // a trellis before made them 0644
			return fmt.Errorf("uid range registry: %w", err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("uid range registry: %w", err)
		}
		dir, name, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
		if owner := (&Store{Dir: dir}); dir != "" && name != "" {
			if b, err := owner.UIDBase(name); err != nil || b == uint32(base) {
				used[uint32(base)] = true // live, or unreadable: kept
			}
		}
	}
	return nil
}

// register records that network name of this state directory holds the range from base.
func (s *Store) register(base uint32, name string) error {
	path := filepath.Join(UIDRegistryDir(), strconv.FormatUint(uint64(base), 10))
	if err := writeAtomic(path, []byte(s.entry(name))); err != nil {
		return fmt.Errorf("uid range registry: %w", err)
	}
	return nil
}

// unregister removes the registry's entry of network name's range from base, if it is this
// state directory's.
func (s *Store) unregister(base uint32, name string) error {
	path := filepath.Join(UIDRegistryDir(), strconv.FormatUint(uint64(base), 10))
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if string(data) != s.entry(name) {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// entry is the registry's record of network name of this state directory.
func (s *Store) entry(name string) string {
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		dir = s.Dir
	}
	return dir + "\n" + name + "\n"
}

// freeUIDs removes network name's range from the registry (Delete then removes its record).
func (s *Store) freeUIDs(name string) error {
	base, err := s.UIDBase(name)
	if err != nil || base == 0 {
		return nil // an unreadable record: Delete removes it, and its entry is stale then
	}
	unlock, err := lockRegistry()
	if err != nil {
		return err
	}
	defer unlock()
	return s.unregister(base, name)
}
