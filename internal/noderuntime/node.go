// Package node builds the containers that virtual nodes run in, from Linux namespaces alone
// (network, mount, UTS, IPC, PID; docs/design.md, decision 1), and runs commands inside them.
//
// A node is held by one init process (package nodeinit, embedded here built) in fresh
// namespaces: trellis's node spawner (spawner.go) makes the node's private file system and
// starts the init, which sets up its /proc, /sys and files, then executes pid1 (pid1/pid1.c),
// a single-threaded program that reports that the node is ready and stays as PID 1 of the
// node, its orphans reaped by the kernel. Killing it ends the node: the kernel kills every
// process of the PID namespace and frees the network namespace with its interfaces.
package noderuntime

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/noderuntime/nodeinit"
	"golang.org/x/sys/unix"
)

// InitArg0 is the name the init process runs under; with the arguments after it, it marks the
// process as a node of one network of one state directory, so that it can be found again.
const InitArg0 = nodeinit.InitArg0

// InitTasks is how many of the host's tasks (pids) an idle node's init holds: pid1
// (pid1/pid1.c), single-threaded, which the init program executes once it has set the node up.
const InitTasks = 1

// JoinArg is the hidden sub-command that joins a node's control groups on the host, then
// enters the node through the enter program (Command).
const JoinArg = "__node-join"

// Config is what the init process needs to set a node up.
type Config = nodeinit.Config

// File is one file written into the node's private file system.
type File = nodeinit.File

// Marker returns the command-line arguments that identify a node's init process. digest
// identifies the settings the node was started with, so that a node whose settings changed is
// recognised as such even after trellis was killed.
func Marker(stateID, netID, node, digest string) []string {
	return []string{InitArg0, stateID, netID, node, digest}
}

// ReadyFile is the file, in a node's private /run, that marks the node as started: trellis
// writes into it (MarkReady) once it has set the node up. A node found without it was being started
// by a trellis that was killed, and is started again.
const ReadyFile = nodeinit.ReadyFile

// ReadyFile is made by the init, empty; MarkReady writes readyText into it. (Host root
// cannot make a file in the node's /run: its uid is not mapped in the node's user namespace.)
const readyText = "ready\n"

// MarkReady marks the node whose init is pid as started.
func MarkReady(pid int) error {
	f, err := openReady(pid, unix.O_WRONLY)
	if err != nil {
		return err
	}
	_, err = f.WriteString(readyText)
	if err2 := f.Close(); err == nil {
		err = err2
	}
	return err
}

// isReady tells whether the node whose init is pid was marked ready.
func isReady(pid int) bool {
	f, err := openReady(pid, unix.O_RDONLY)
	if err != nil {
		return false
	}
	defer f.Close()
	data := make([]byte, len(readyText)+1)
	n, _ := f.Read(data)
	return string(data[:n]) == readyText
}

// errNotReadyFile is returned for a ReadyFile that is not the one the node's setup made.
var errNotReadyFile = errors.New("not the node's ready file")

// openReady opens the ReadyFile of the node whose init is pid. The node's root may have
// changed its tree (mounts, links): the path is resolved inside the node's root with no
// symbolic link followed, and the file must be the one the node's setup made, a file on tmpfs
// owned by host root, which the node's root can neither make nor change.
func openReady(pid, flags int) (*os.File, error) {
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, "."+ReadyFile, &unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	if err := unix.Fstat(fd, &st); err == nil {
		err = unix.Fstatfs(fd, &fs)
	}
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 || fs.Type != unix.TMPFS_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("node %d: %s: %w", pid, ReadyFile, errNotReadyFile)
	}
	return os.NewFile(uintptr(fd), ReadyFile), nil
}

// Running is a node init process found by FindRunning.
type Running struct {
	PID    int
	Digest string
	Ready  bool // its init finished setting the node up
}

// Find returns the pids of the init processes of network netID of state directory stateID, by
// node name. It reads /proc, so it finds nodes that no record mentions, such as those of an
// `up` that was killed before it could write their pids.
func Find(stateID, netID string) (map[string]int, error) {
	found, err := FindRunning(stateID, netID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(found))
	for name, r := range found {
		out[name] = r.PID
	}
	return out, nil
}

// FindRunning is Find with the digest each node was started with.
func FindRunning(stateID, netID string) (map[string]Running, error) {
	return FindRunningIn(nil, stateID, netID)
}

// FindRunningIn is FindRunning among processes pids only (nil: every process): a caller that
// knows every process the network could have (kinds.Env.Listed) spares the scan of /proc.
func FindRunningIn(pids []int, stateID, netID string) (map[string]Running, error) {
	found, err := FindMarkedIn(pids, InitArg0, stateID, netID, false)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Running, len(found))
	for name, m := range found {
		out[name] = Running{PID: m.PID, Digest: m.Digest, Ready: isReady(m.PID)}
	}
	return out, nil
}

// Marked is a process trellis started with a marker command line: ARG0 STATE-ID NET-ID NAME
// DIGEST (a node's init, a node's engines helper).
type Marked struct {
	PID    int
	Digest string
}

// FindMarked finds the processes whose command line is the marker of arg0 for network netID
// of state directory stateID, by name; with skipGone, not zombies. A node's root sees its init's
// marker and may start processes with any command line, but not where trellis starts them: a
// process with a node init's marker counts only if it is one (isInit), one with another
// marker (a node's engines helper) only if it runs in trellis's own PID namespace.
func FindMarked(arg0, stateID, netID string, skipGone bool) (map[string]Marked, error) {
	return FindMarkedIn(nil, arg0, stateID, netID, skipGone)
}

// FindMarkedIn is FindMarked among processes pids only (nil: every process).
func FindMarkedIn(pids []int, arg0, stateID, netID string, skipGone bool) (map[string]Marked, error) {
	pids, err := pidsOr(pids)
	if err != nil {
		return nil, err
	}
	want := strings.Join([]string{arg0, stateID, netID, ""}, "\x00")
	out := map[string]Marked{}
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(string(cmdline), want) {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if len(args) == 5 && !(skipGone && Gone(pid)) && startedHere(arg0, pid) {
			out[args[3]] = Marked{PID: pid, Digest: args[4]}
		}
	}
	return out, nil
}

// UIDBases returns the first host uid of the user namespace of every node init running on the
// machine, whatever its state directory: the uid ranges in use.
func UIDBases() (map[uint32]bool, error) { return UIDBasesIn(nil) }

// UIDBasesIn is UIDBases among processes pids only (nil: every process).
func UIDBasesIn(pids []int) (map[uint32]bool, error) {
	pids, err := pidsOr(pids)
	if err != nil {
		return nil, err
	}
	out := map[uint32]bool{}
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(string(cmdline), InitArg0+"\x00") {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
		if err != nil {
			continue // gone meanwhile
		}
		f := strings.Fields(string(data))
		if len(f) >= 3 && f[0] == "0" {
			if base, err := strconv.ParseUint(f[1], 10, 32); err == nil && base != 0 {
				out[uint32(base)] = true
			}
		}
	}
	return out, nil
}

// pidsOr returns pids, or with nil every process's pid, from /proc.
func pidsOr(pids []int) ([]int, error) {
	if pids != nil {
		return pids, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	pids = make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
