// Package vmsock names the unix sockets on which a VM node's QEMU serves its monitor, its
// agent's ports and its route mirror, and makes the directories that hold them: one per VM,
// RunDir/STATEID.NETID/NAME, each level of mode 0700 and owned by root, so that only root
// (trellis) may connect to them. Abstract sockets have no permissions and list their names in
// /proc/net/unix: any local user could drive the monitor (docs/security.md, "A local
// unprivileged user").
package vmsock

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// RunDir holds the VMs' socket directories (a variable for the tests).
var RunDir = "/run/trellis/vm"

// The sockets of a VM: its monitor (QMP), its agent's port, its terminal port and its route
// mirror port (internal/guest, internal/enginehelper).
const (
	Monitor = "qmp"
	Agent   = "agent"
	TTY     = "tty"
	Mirror  = "mirror"
)

// maxPath is the longest path a unix socket address holds (sun_path's 108 bytes, with the
// terminating NUL).
const maxPath = 107

// ErrDir is returned when a socket directory cannot be made root's alone.
var ErrDir = errors.New("VM socket directory")

// NetworkDir is the directory of the sockets of network netID of state directory stateID.
func NetworkDir(stateID, netID string) string {
	return filepath.Join(RunDir, stateID+"."+netID)
}

// Dir is the directory of the sockets of VM name (a node, or an engine VM) of network netID.
func Dir(stateID, netID, name string) string {
	return filepath.Join(NetworkDir(stateID, netID), dirName(stateID, netID, name))
}

// Path is the socket what (Monitor, Agent, TTY or Mirror) of VM name of network netID.
func Path(stateID, netID, name, what string) string {
	return filepath.Join(Dir(stateID, netID, name), what)
}

// dirName is the name of VM name's directory: the name itself, or, where a socket path would
// not fit sun_path with it (a long node name), a digest of it, which starts with "=" (no node
// name does).
func dirName(stateID, netID, name string) string {
	if len(filepath.Join(NetworkDir(stateID, netID), name, Mirror)) <= maxPath {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "=" + hex.EncodeToString(sum[:12])
}

// Make makes VM name's socket directory, empty (a socket left by a QEMU that was killed goes),
// in RunDir, each level of mode 0700 and owned by root.
func Make(stateID, netID, name string) error {
	if err := os.MkdirAll(filepath.Dir(RunDir), 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	dir := Dir(stateID, netID, name)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	for _, d := range []string{RunDir, NetworkDir(stateID, netID), dir} {
		if err := rootDir(d); err != nil {
			return err
		}
	}
	return nil
}

// rootDir makes directory d (if it is not there) and checks that it is a directory of root's
// of mode 0700, not a link.
func rootDir(d string) error {
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 {
		return fmt.Errorf("%w: %s is not a directory of root's: remove it", ErrDir, d)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(d, 0o700)
	}
	return nil
}

// Remove removes VM name's socket directory, and its network's once that is empty.
func Remove(stateID, netID, name string) error {
	if err := os.RemoveAll(Dir(stateID, netID, name)); err != nil {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	return removeIfEmpty(NetworkDir(stateID, netID))
}

func removeIfEmpty(dir string) error {
	err := os.Remove(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	return nil
}

// Sweep removes the socket directories of network netID's VMs that are not in keep (their
// QEMU ended without Remove: killed, or trellis with it), and the network's once empty.
func Sweep(stateID, netID string, keep []string) error {
	entries, err := os.ReadDir(NetworkDir(stateID, netID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDir, err)
	}
	kept := map[string]bool{}
	for _, name := range keep {
		kept[dirName(stateID, netID, name)] = true
	}
	for _, e := range entries {
		if kept[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(NetworkDir(stateID, netID), e.Name())); err != nil {
			return fmt.Errorf("%w: %v", ErrDir, err)
		}
	}
	return removeIfEmpty(NetworkDir(stateID, netID))
}
