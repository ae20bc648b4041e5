package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// UIDRangeSize is the number of host uids (and gids) each network gets: a node's user
// namespace maps its uids 0..65535 onto them (docs/design.md, decision 1).
const UIDRangeSize = 65536

// Defaults of the host uid ranges: the first range starts at DefaultUIDBase, and there are
// DefaultUIDRanges of them, so the last uid given out is below 2^31. TRELLIS_UID_BASE and
// TRELLIS_UID_RANGES in the environment override them.
const (
	DefaultUIDBase   = 1 << 30
	DefaultUIDRanges = 16384
)

// ErrNoUIDs is returned when every host uid range is in use.
var ErrNoUIDs = errors.New("no free host uid range")

// ErrUIDConfig is returned for a bad TRELLIS_UID_BASE or TRELLIS_UID_RANGES.
var ErrUIDConfig = errors.New("bad uid range setting")

// uidConfig reads the ranges' base and count from the environment.
func uidConfig() (base, count uint32, err error) {
	base, count = DefaultUIDBase, DefaultUIDRanges
	for _, v := range []struct {
		name string
		to   *uint32
	}{{"TRELLIS_UID_BASE", &base}, {"TRELLIS_UID_RANGES", &count}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %s=%q is not a number", ErrUIDConfig, v.name, s)
		}
		*v.to = uint32(n)
	}
	switch {
	case base == 0 || base%UIDRangeSize != 0:
		return 0, 0, fmt.Errorf("%w: TRELLIS_UID_BASE=%d: give a positive multiple of %d", ErrUIDConfig, base, UIDRangeSize)
	case count == 0 || uint64(base)+uint64(count)*UIDRangeSize > 1<<32-1:
		return 0, 0, fmt.Errorf("%w: TRELLIS_UID_RANGES=%d: give at least 1, with TRELLIS_UID_BASE + ranges*%d below 2^32", ErrUIDConfig, count, UIDRangeSize)
	}
	return base, count, nil
}

func (s *Store) uidPath(name string) string { return filepath.Join(s.Dir, "uids", name) }

// UIDBase returns the first host uid of network name's range, or 0 if it has none.
func (s *Store) UIDBase(name string) (uint32, error) {
	data, err := os.ReadFile(s.uidPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("uid range of %s: %w", name, err)
	}
	return uint32(n), nil
}

// AllocUIDs returns network name's range of UIDRangeSize host uids and gids (its first uid),
// allocating one if it has none: the lowest range that no network of any state directory holds
// (the machine's registry, UIDRegistryDir, under its lock) and that busy does not report (busy
// lists the first host uids of ranges seen in use on the machine, e.g. by nodes whose record
// was lost). The range is recorded in the state directory and the registry until Delete.
func (s *Store) AllocUIDs(name string, busy func() (map[uint32]bool, error)) (uint32, error) {
	if base, err := s.UIDBase(name); base != 0 || err != nil {
		return base, err
	}
	unlock, err := lockRegistry() // the machine's, whatever the state directory
	if err != nil {
		return 0, err
	}
	defer unlock()
	if base, err := s.UIDBase(name); base != 0 || err != nil {
		return base, err // allocated while we waited for the lock
	}
	first, count, err := uidConfig()
	if err != nil {
		return 0, err
	}
	used, err := busy()
	if err != nil {
		return 0, fmt.Errorf("uid ranges in use: %w", err)
	}
	if err := s.recordedUIDs(used); err != nil {
		return 0, err
	}
	if err := registered(used); err != nil {
		return 0, err
	}
	for i := uint32(0); i < count; i++ {
		base := first + i*UIDRangeSize
		if used[base] {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(s.uidPath(name)), DirMode); err != nil {
			return 0, err
		}
		if err := writeAtomic(s.uidPath(name), []byte(strconv.FormatUint(uint64(base), 10)+"\n")); err != nil {
			return 0, err
		}
		return base, s.register(base, name)
	}
	return 0, fmt.Errorf("%w: all %d ranges of %d uids from %d are in use; run `trellis down` on a network, or set TRELLIS_UID_RANGES (and TRELLIS_UID_BASE) for more", ErrNoUIDs, count, UIDRangeSize, first)
}

// recordedUIDs adds the ranges recorded for this state directory's networks to used.
func (s *Store) recordedUIDs(used map[uint32]bool) error {
	files, err := filepath.Glob(filepath.Join(s.Dir, "uids", "*"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".tmp") {
			continue
		}
		base, err := s.UIDBase(filepath.Base(f))
		if err != nil {
			return err
		}
		used[base] = true
	}
	return nil
}
