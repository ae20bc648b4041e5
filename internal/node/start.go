package node

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"golang.org/x/sys/unix"
)

// namespaces a node's init gets of its own (its mount namespace is a copy of the setup
// process's). The user namespace is made first, so
// that it owns the others: the node's root has every capability over its own network, mounts,
// hostname, IPC and processes, and none over the host's. The init makes its cgroup namespace
// itself, once it is in its group, so that the group is the root of the node's cgroup tree.
const namespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWPID

// Options are how the host sets a node up, beyond what its init does inside.
type Options struct {
	// UIDBase is the first of the UIDRange host uids and gids that the node's user namespace
	// maps its uids and gids 0..UIDRange-1 onto.
	UIDBase uint32
	// Etc is the network's etc template (EtcTemplate): the lower layer of the node's /etc.
	// The init, an unprivileged uid on the host, must be able to reach it by its path.
	Etc string
	// Cgroup is the node's control group, made with its limits; nil: none.
	Cgroup *cgroup.Group
}

// UIDRange is the number of uids and gids a node's user namespace maps.
const UIDRange = 65536

// Start creates a node: an init process in new namespaces, marked with marker, set up with cfg.
// It returns the init's pid once the node is ready. The node outlives trellis.
//
// trellis makes the node's file system on a thread of its own in a new mount namespace
// (onSetupThread, mountPrivate), starts the init (package nodeinit) from that thread in the node's user
// namespace, places it in the node's control group before it runs anything of the node, and
// sends it its configuration.
func Start(marker []string, cfg Config, opt Options) (int, error) {
	if opt.UIDBase == 0 || opt.Etc == "" {
		return 0, fmt.Errorf("starting node: %w", ErrNoUIDBase)
	}
	cfg.UIDBase, cfg.Etc = opt.UIDBase, opt.Etc
	p, err := openPipes(opt)
	if err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	defer p.close()
	var cmd *exec.Cmd
	var confW *os.File
	_, err = onSetupThread(func() (int, error) {
		if err := mountPrivate(cfg); err != nil {
			return 0, err
		}
		cmd, confW, err = startInit(marker, cfg.UIDBase, p.exe, p.readyW, p.cgroup)
		return 0, err
	})
	p.closeChild()
	if err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	reapWhenGone(pid) // trellis is the init's parent while it runs (serve, agent)
	err = protectInit(pid)
	if err == nil && opt.Cgroup != nil && p.cgroup == nil {
		err = opt.Cgroup.Place(pid) // cgroup v1: before the init reads its configuration
	}
	if err == nil {
		err = sendConfig(confW, cfg)
	} else {
		confW.Close()
	}
	if err == nil {
		err = readReady(bufio.NewReader(p.ready))
	}
	if err != nil {
		Kill(pid)
		return 0, fmt.Errorf("starting node: %w", err)
	}
	return pid, nil
}

// reapWhenGone reaps child pid once it has exited, without holding a thread meanwhile: the
// runtime's poller waits on a pidfd of the child.
func reapWhenGone(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return // gone already, or an old kernel: the process is left to its next parent
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return
	}
	go func() {
		defer f.Close()
		rc.Read(func(fd uintptr) bool {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil)
			return err != unix.EAGAIN && (err != nil || info.Signo != 0) // Signo stays 0 while it runs
		})
	}()
}

// readReady reads "ok" from the init, or its error.
func readReady(r *bufio.Reader) error {
	line, _ := r.ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "error:"):
		return errors.New(strings.TrimSpace(strings.TrimPrefix(line, "error:")))
	case line == "ok":
		return nil
	}
	return errors.New("node init exited before it was ready")
}

// initPipes are the files between trellis and a node's init while it starts.
type initPipes struct {
	ready, readyW *os.File // the init's "ok", or an error, on its fd 3
	exe           *os.File // the init program (initFile, shared: never closed), its fd 4
	cgroup        *os.File // cgroup v2: the node's group's directory
}

func (p *initPipes) closeChild() {
	for _, f := range []*os.File{p.readyW, p.cgroup} {
		if f != nil {
			f.Close()
		}
	}
}

func (p *initPipes) close() {
	p.closeChild()
	if p.ready != nil {
		p.ready.Close()
	}
}

// openPipes opens what the init inherits.
func openPipes(opt Options) (*initPipes, error) {
	p := &initPipes{}
	var err error
	p.exe, err = initFile()
	if err == nil {
		p.ready, p.readyW, err = os.Pipe()
	}
	if err == nil && opt.Cgroup != nil {
		p.cgroup, err = opt.Cgroup.FD()
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// ErrNoUIDBase is returned by Start without a uid range: nodes never run as host root.
var ErrNoUIDBase = errors.New("no host uid range or etc template given")

// Kill ends a node. pid must be a node init found with Find or recorded at Start.
func Kill(pid int) error {
	err := syscall.Kill(pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// Gone tells whether process pid has left the process table or is a zombie (whose namespaces
// are released already).
func Gone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(data), ") Z ")
}

// WaitGone waits until killed processes have left the process table (or are zombies, whose
// namespaces are released already), at most 10 seconds.
func WaitGone(pids ...int) error {
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !Gone(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d did not end", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}
