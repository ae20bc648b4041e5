// Package nodeinit is the program that sets up every container node as its PID 1, kept apart
// from the rest of trellis so that starting it is cheap: it imports the standard library and
// x/sys/unix only, and trellis embeds it built (package node, `go generate ./internal/noderuntime`)
// and starts it from memory for each node. The trellis binary, with its many packages to
// initialise, would take ten times longer to start.
//
// The init sets the node up inside its namespaces, then executes pid1 (package node,
// pid1/pid1.c) in its place: a single-threaded C program that reports that the node is ready
// and stays as PID 1 of the node, its children reaped by the kernel. A Go program cannot stay
// instead: it always runs several threads, each one of the host's tasks. Killing PID 1 ends
// the node: the kernel kills every process of the PID namespace and frees the network
// namespace with its interfaces.
package nodeinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitArg0 is the name the init process runs under; with the arguments after it, it marks the
// process as a node of one network of one state directory, so that it can be found again.
const InitArg0 = "trellis-node"

// Config is what the init process needs to set a node up; it travels as JSON on its stdin.
type Config struct {
	Hostname string
	Etc      string // the etc template: the lower layer of the node's /etc
	// Rootfs is the node's own root directory (absolute, without symbolic links); "": the
	// host's root (rootfs.go).
	Rootfs string `json:",omitempty"`
	// TmpfsSize is the size in bytes of each private directory; 0: the default.
	TmpfsSize uint64 `json:",omitempty"`
	UIDBase   uint32 // the host uid of the node's root
	Files     []File
	// Seccomp is the nodes' seccomp filter, a classic BPF program (InstallFilter), installed
	// once the node is set up, before anything else runs in it.
	Seccomp []byte
}

// File is one file written into the node's private file system.
type File struct {
	Path    string
	Content string
	Mode    uint32 `json:",omitempty"` // permission bits; 0 means 0644
	Owner   string `json:",omitempty"` // USER or USER:GROUP inside the node; "" means root
}

// ErrNotMainThread is returned when the init runs on another thread than the process's main
// thread: Main must be called from a package initialiser (see initMain).
var ErrNotMainThread = errors.New("the node's init is not on its main thread")

// Main runs the init (InitArg0) or the spawner (SpawnerArg0), as os.Args[0] says, and never
// returns. The init
// program calls it from a package initialiser (func init): while initialisers run, the Go
// runtime keeps the goroutine on the process's main thread, which the node's init needs,
// without runtime.LockOSThread, which would start one more thread (the runtime's template
// thread) in every node.
func Main() {
	switch {
	case os.Args[0] == InitArg0:
		initMain()
	case os.Args[0] == SpawnerArg0:
		spawnerMain()
	}
	fmt.Fprintf(os.Stderr, "usage: %s STATE NET NODE DIGEST\n", InitArg0)
	os.Exit(2)
}

// initMain is the node init process (PID 1 of the node), started by trellis in the node's user
// namespace with its mounts made and locked. It never returns: once the node is set up it
// executes pid1 (fd 5), which reports the node ready on fd 3.
func initMain() {
	ready := os.NewFile(3, "ready")
	unix.Close(4) // the program it was executed from
	unix.CloseOnExec(5)
	var cfg Config
	err := json.NewDecoder(os.Stdin).Decode(&cfg)
	if err == nil && unix.Gettid() != unix.Getpid() {
		// /proc/PID/ns/cgroup, which `trellis exec` enters, is the main thread's, and the
		// init makes its cgroup namespace below.
		err = ErrNotMainThread
	}
	if err == nil {
		// The init is in its group already (trellis placed it before sending cfg).
		err = unix.Unshare(unix.CLONE_NEWCGROUP)
	}
	if err == nil {
		err = setup(cfg)
	}
	if err == nil {
		err = execPID1()
	}
	fmt.Fprintf(ready, "error: %v\n", err)
	os.Exit(1)
}

// execPID1 executes pid1 in place of the init, with the same command line (the node's marker)
// and the ready pipe as its fd 3; its standard input, the configuration pipe, becomes
// /dev/null (its standard output). It returns only if the exec failed. The node's /proc,
// through which it executes fd 5, is the one setup mounted: nothing else of the node runs yet.
func execPID1() error {
	if err := unix.Dup3(1, 0, 0); err != nil {
		return fmt.Errorf("pid1: %w", err)
	}
	return fmt.Errorf("executing pid1: %w", syscall.Exec("/proc/self/fd/5", os.Args, nil))
}

func setup(cfg Config) error {
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := mountProcSys(); err != nil {
		return err
	}
	files := append([]File{{Path: "/etc/hostname", Content: cfg.Hostname + "\n"}}, cfg.Files...)
	if err := writeFiles(files); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	// Last, before anything else runs in the node: every other process of the node enters
	// through trellis, which installs the same filter (package node, JoinMain).
	if err := InstallFilter(cfg.Seccomp); err != nil {
		return fmt.Errorf("the node's %w", err)
	}
	return nil
}

// loopbackUp brings the node's lo up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	}
	if err == nil {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	return err
}
