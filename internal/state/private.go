package state

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// What trellis writes in a state directory is for root alone: records hold every `files:`
// content of their networks, logs every node's output. The state directory is made 0700, and
// the directories and files trellis makes in it (records, logs, uid ranges, locks, VM disks,
// engines' status, bench runs) DirMode and FileMode; the uid range registry likewise.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// The directories and files that trellis makes in a state directory, directly below it.
var (
	ownDirs  = []string{"networks", "logs", "uids", "vm", "engines", "bench"}
	ownFiles = []string{"id", "machine.lock"}
)

// makePrivate makes the state directory dir with mode DirMode if it does not exist. One that
// exists keeps its mode: trellis changes only what it made, and the directory may be the
// user's (--state-dir). What trellis made in it is tightened to DirMode and FileMode: a
// trellis before made them 0755 and 0644, and they are all it holds of the networks.
func makePrivate(dir string) error {
	if err := makeDir(dir); err != nil {
		return err
	}
	for _, d := range ownDirs {
		if err := tighten(filepath.Join(dir, d), fs.ModeDir, DirMode); err != nil {
			return err
		}
	}
	for _, f := range ownFiles {
		if err := tighten(filepath.Join(dir, f), 0, FileMode); err != nil {
			return err
		}
	}
	return nil
}

// makeDir makes dir with mode DirMode (its parents 0755) if it does not exist.
func makeDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// tighten takes from path, if it is there and of type typ (fs.ModeDir, or 0 for a regular
// file), the permissions beyond mode. A symbolic link is left alone.
func tighten(path string, typ, mode fs.FileMode) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != typ || fi.Mode().Perm()&^mode == 0 {
		return nil
	}
	return os.Chmod(path, fi.Mode().Perm()&mode)
}

// writeAtomic writes data to path with mode FileMode: a crash leaves the old or the new file,
// never half.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return err
	}
	if err := f.Chmod(FileMode); err != nil { // a crash's leftover may be 0644
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
