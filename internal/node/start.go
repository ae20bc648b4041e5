package node

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
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
// trellis starts a setup process (SetupMain) in a new mount namespace, places it in the node's
// control group, and sends it the configuration; the setup process makes the node's file
// system, starts the init (InitMain) in the node's user namespace and exits.
func Start(marker []string, cfg Config, opt Options) (int, error) {
	if opt.UIDBase == 0 || opt.Etc == "" {
		return 0, fmt.Errorf("starting node: %w", ErrNoUIDBase)
	}
	cfg.UIDBase, cfg.Etc = opt.UIDBase, opt.Etc
	cmd, pipes, err := setupCommand(opt)
	if err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	defer pipes.close()
	err = cmd.Start()
	pipes.closeChild()
	if err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	defer cmd.Wait() // the setup process exits once the init runs
	if opt.Cgroup != nil {
		err = opt.Cgroup.Place(cmd.Process.Pid) // before anything of the node runs
	}
	if err == nil {
		err = json.NewEncoder(pipes.conf).Encode(setupConfig{Config: cfg, Marker: marker})
	}
	pipes.conf.Close()
	pid, err := readReady(bufio.NewReader(pipes.ready), err)
	if err != nil {
		cmd.Process.Kill()
		if pid != 0 {
			Kill(pid)
		}
		return 0, fmt.Errorf("starting node: %w", err)
	}
	return pid, nil
}

// readReady reads the init's pid from the setup process, then "ok" from the init.
func readReady(r *bufio.Reader, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	pid := 0
	for _, want := range []string{"pid", "ok"} {
		line, _ := r.ReadString('\n')
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "error:"):
			return pid, errors.New(strings.TrimSpace(strings.TrimPrefix(line, "error:")))
		case want == "pid" && strings.HasPrefix(line, "pid "):
			pid, err = strconv.Atoi(strings.TrimPrefix(line, "pid "))
		case want == "ok" && line == "ok":
		default:
			err = errors.New("node init exited before it was ready")
		}
		if err != nil {
			return pid, err
		}
	}
	return pid, nil
}

// initPipes are the files between trellis and a node's setup and init while it starts.
type initPipes struct {
	conf, confR   *os.File // the configuration, on the setup process's stdin
	ready, readyW *os.File // the init's pid and "ok", or an error, on fd 3
	exe           *os.File // the trellis binary, fd 4
	cgroup        *os.File // cgroup v2: the node's group's directory
}

func (p *initPipes) closeChild() {
	for _, f := range []*os.File{p.confR, p.readyW, p.exe, p.cgroup} {
		if f != nil {
			f.Close()
		}
	}
}

func (p *initPipes) close() {
	p.closeChild()
	for _, f := range []*os.File{p.conf, p.ready} {
		if f != nil {
			f.Close()
		}
	}
}

// setupCommand prepares the setup process: host root in a new mount namespace, and on cgroup
// v2 started straight into the node's group.
func setupCommand(opt Options) (*exec.Cmd, *initPipes, error) {
	p := &initPipes{}
	self, err := os.Executable()
	if err == nil {
		p.exe, err = os.Open(self)
	}
	if err == nil {
		p.ready, p.readyW, err = os.Pipe()
	}
	if err == nil {
		p.confR, p.conf, err = os.Pipe()
	}
	if err == nil && opt.Cgroup != nil {
		p.cgroup, err = opt.Cgroup.FD()
	}
	if err != nil {
		p.close()
		return nil, nil, err
	}
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS,
		Setsid:     true, // no terminal signals from the shell that ran `trellis up`
	}
	if p.cgroup != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, int(p.cgroup.Fd())
	}
	cmd := &exec.Cmd{
		Path:        self,
		Args:        []string{SetupArg0},
		Stdin:       p.confR,
		ExtraFiles:  []*os.File{p.readyW, p.exe}, // fds 3 and 4
		SysProcAttr: attr,
		Env:         []string{"GOMAXPROCS=1", "GOGC=400"}, // the init mostly sleeps: keep it small
	}
	return cmd, p, nil
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
