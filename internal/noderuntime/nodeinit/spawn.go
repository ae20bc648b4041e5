package nodeinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// The spawner starts node inits for trellis. A process that makes a user namespace must fork
// (not vfork: the child waits until its parent has written its uid and gid maps), and a fork
// copies the page tables of the forking process: the trellis process, tens of megabytes of
// binary and heap, paid that for every node, and again for every page it touched while the
// child ran. The spawner is this small program: trellis starts it once (a vfork), and it forks
// each node's init from its own small address space.
//
// Trellis and the spawner talk over a SOCK_SEQPACKET socket pair (the spawner's end is its fd
// 3; the init program's sealed file is its fd 4, pid1's (package node, pid1/pid1.c) its fd 5,
// both passed on to every init at the same numbers): one message per SpawnRequest, carrying the
// init's configuration pipe (read end), its ready pipe (write end) and, on cgroup v2, the node's
// group directory as SCM_RIGHTS; one SpawnReply per request, in any order. The spawner exits
// when trellis closes its end (or dies); inits it started then go to the host's init, as they
// do when trellis exits. It reaps the inits that end while it runs.

// SpawnerArg0 is the name the spawner runs under.
const SpawnerArg0 = "trellis-node-spawner"

// Namespaces a node's init gets of its own (its mount namespace is a copy of the setup
// thread's). The user namespace is made first, so that it owns the others: the node's root has
// every capability over its own network, mounts, hostname, IPC and processes, and none over the
// host's. The init makes its cgroup namespace itself, once it is in its group, so that the
// group is the root of the node's cgroup tree.
const Namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWPID

// UIDRange is the number of uids and gids a node's user namespace maps.
const UIDRange = 65536

// SpawnRequest asks the spawner for one node init.
type SpawnRequest struct {
	ID        uint64   // echoed in the reply
	Marker    []string // the init's command line (package node, Marker)
	UIDBase   uint32   // host uid and gid of the node's root
	Etc       string   // the etc template (Config.Etc)
	Rootfs    string   `json:",omitempty"` // Config.Rootfs
	TmpfsSize uint64   `json:",omitempty"` // Config.TmpfsSize
	Cgroup    bool     `json:",omitempty"` // a cgroup v2 directory is the message's third file
}

// SpawnReply is the spawner's answer to the request with the same ID: the init's pid, or
// what went wrong.
type SpawnReply struct {
	ID  uint64
	PID int    `json:",omitempty"`
	Err string `json:",omitempty"`
}

// MaxSpawnMessage bounds a request or reply.
const MaxSpawnMessage = 64 << 10

// spawnerMain serves requests on fd 3 until trellis closes it. It never returns.
func spawnerMain() {
	// Nothing of the spawner's may reach an init: a node's root must not talk to it.
	unix.CloseOnExec(3)
	unix.CloseOnExec(4)
	unix.CloseOnExec(5)
	devnull, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", SpawnerArg0, err)
		os.Exit(1)
	}
	base, err := prepareBase()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", SpawnerArg0, err)
		os.Exit(1)
	}
	go reapChildren()
	buf := make([]byte, MaxSpawnMessage)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(3, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			os.Exit(0) // trellis closed its end, or is gone
		}
		fds := rights(oob[:oobn])
		var req SpawnRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil || len(fds) != 2+b2i(req.Cgroup) {
			closeAll(fds)
			reply(SpawnReply{ID: req.ID, Err: fmt.Sprintf("bad spawn request (%d files): %v", len(fds), err)})
			continue
		}
		go func() {
			defer closeAll(fds)
			cg := -1
			if req.Cgroup {
				cg = fds[2]
			}
			pid, err := spawnOne(base, req, []uintptr{uintptr(fds[0]), uintptr(devnull), uintptr(devnull), uintptr(fds[1]), 4, 5}, cg)
			r := SpawnReply{ID: req.ID, PID: pid}
			if err != nil {
				r.Err = err.Error()
			}
			reply(r)
		}()
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rights returns the files of a message's SCM_RIGHTS.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// reply sends r to trellis; if trellis is gone, the spawner ends.
func reply(r SpawnReply) {
	data, _ := json.Marshal(r) // a SpawnReply always marshals
	if err := unix.Sendmsg(3, data, nil, nil, 0); err != nil {
		os.Exit(0)
	}
}

// spawnOne makes the node's file system on a thread of its own in a copy of the base tree's
// mount namespace (base, prepareBase; enterBase, mountPrivate), then starts the init from that
// thread in the node's namespaces, its user namespace mapped onto req.UIDBase, with files as its fds 0 to 5 and, if cgroupFD >= 0,
// straight into that cgroup v2 group. The init's mount namespace is a copy made for a less
// privileged user namespace, so the kernel locks every mount in it: the node's root cannot
// unmount its private directories to reach the host's beneath. The thread ends with its
// goroutine (it stays locked to it), and its mount namespace with the thread.
func spawnOne(base int, req SpawnRequest, files []uintptr, cgroupFD int) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with this goroutine
		if err := enterBase(base, req.Rootfs != ""); err != nil {
			done <- result{0, err}
			return
		}
		if err := mountPrivate(Config{UIDBase: req.UIDBase, Etc: req.Etc, Rootfs: req.Rootfs, TmpfsSize: req.TmpfsSize}); err != nil {
			done <- result{0, err}
			return
		}
		ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(req.UIDBase), Size: UIDRange}}
		attr := &syscall.SysProcAttr{
			Cloneflags: Namespaces,
			Setsid:     true, // no terminal signals from the shell that ran `trellis up`
			// setgroups stays allowed, for daemons that call initgroups when they drop to
			// their own user (FRR, BIRD).
			UidMappings: ids, GidMappings: ids, GidMappingsEnableSetgroups: true,
			Credential: &syscall.Credential{Uid: 0, Gid: 0}, // the node's root, not an unmapped uid
		}
		if cgroupFD >= 0 { // cgroup v2: started straight into the node's group
			attr.UseCgroupFD, attr.CgroupFD = true, cgroupFD
		}
		pid, err := syscall.ForkExec("/proc/self/fd/4", req.Marker, &syscall.ProcAttr{
			Env:   []string{"GOMAXPROCS=1", "GOGC=400"}, // the init lives only while it sets the node up
			Files: files,
			Sys:   attr,
		})
		if err != nil {
			err = fmt.Errorf("starting the node's init: %w", err)
		}
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}

// enterBase gives the calling thread, locked to it, a mount namespace of its own that is a
// copy of the base tree's (base, a descriptor of its namespace); with hostTree (a node with
// its own root file system, which pivot detaches from the host's anyway), a copy of the
// spawner's, made private.
func enterBase(base int, hostTree bool) error {
	if hostTree {
		// CLONE_NEWNS unshares the thread's root and working directory too (CLONE_FS).
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("new mount namespace: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making mounts private: %w", err)
		}
		return nil
	}
	// setns into a mount namespace needs a root and working directory of the thread's own.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unsharing the file system attributes: %w", err)
	}
	if err := unix.Setns(base, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("entering the nodes' base tree: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("new mount namespace: %w", err)
	}
	return nil
}

// reapChildren reaps the inits that end while the spawner runs.
func reapChildren() {
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for range children {
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
