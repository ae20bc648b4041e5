package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A node's file system is made by trellis itself (host root) on a thread of its own in a new
// mount namespace: the thread makes its mounts private, the host's tree read-only, mounts the
// node's private directories (mountPrivate), then starts the node's init from that thread in new
// user, mount, network, UTS, IPC and PID namespaces. The init's mount namespace is a copy made
// for a less privileged user namespace, so the kernel locks every mount in it: the node's root
// cannot unmount its private directories to reach the host's beneath, nor make the host's file
// system writable again. The thread ends with its goroutine (it stays locked to it), and its
// mount namespace with the thread: the only process start per node is the init's.

// onSetupThread runs f on a new OS thread in a new mount namespace, which no other goroutine
// ever runs on: the Go runtime ends a thread whose goroutine exits while locked to it, and
// makes new threads from a clean one, never from a locked thread.
func onSetupThread(f func() (int, error)) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with this goroutine
		// CLONE_NEWNS unshares the thread's root and working directory too (CLONE_FS).
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- result{0, fmt.Errorf("new mount namespace: %w", err)}
			return
		}
		pid, err := f()
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}

// startInit starts the node's init (marked with marker) in new user, mount, network, UTS, IPC
// and PID namespaces, the user namespace first so that it owns the others, on the calling
// thread (onSetupThread), and returns it running, blocked on reading its configuration
// (sendConfig). exe is the init program (initFile).
func startInit(marker []string, base uint32, exe, ready *os.File, cgroupFD *os.File) (*exec.Cmd, *os.File, error) {
	conf, confW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer conf.Close()
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: UIDRange}}
	attr := &syscall.SysProcAttr{
		Cloneflags: namespaces,
		Setsid:     true, // no terminal signals from the shell that ran `trellis up`
		// setgroups stays allowed, for daemons that call initgroups when they drop to their
		// own user (FRR, BIRD).
		UidMappings: ids, GidMappings: ids, GidMappingsEnableSetgroups: true,
		Credential: &syscall.Credential{Uid: 0, Gid: 0}, // the node's root, not an unmapped uid
	}
	if cgroupFD != nil { // cgroup v2: started straight into the node's group
		attr.UseCgroupFD, attr.CgroupFD = true, int(cgroupFD.Fd())
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/fd/4", // exe, in the child
		Args:        marker,
		Stdin:       conf,
		ExtraFiles:  []*os.File{ready, exe}, // fds 3 and 4
		SysProcAttr: attr,
		Env:         []string{"GOMAXPROCS=1", "GOGC=400"}, // the init mostly sleeps: keep it small
	}
	if err := cmd.Start(); err != nil {
		confW.Close()
		return nil, nil, fmt.Errorf("starting the node's init: %w", err)
	}
	return cmd, confW, nil
}

// protectInit sets the init's oom_score_adj to -1000 before anything of the node runs: when
// the node runs out of memory, the kernel kills its other processes (none of which the init
// starts), never the init that holds the node. It takes
// CAP_SYS_RESOURCE, which some machines withhold even from root (then the init, small, is
// merely unlikely to go).
func protectInit(pid int) error {
	err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("-1000"), 0)
	if errors.Is(err, os.ErrPermission) {
		return nil
	}
	return err
}

// sendConfig hands the init its configuration and closes the pipe.
func sendConfig(w *os.File, cfg Config) error {
	err := json.NewEncoder(w).Encode(cfg)
	if err2 := w.Close(); err == nil {
		err = err2
	}
	return err
}
