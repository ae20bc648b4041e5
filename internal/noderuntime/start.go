package noderuntime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/noderuntime/nodeinit"
)

// Options are how the host sets a node up, beyond what its init does inside.
type Options struct {
	// UIDBase is the first of the UIDRange host uids and gids that the node's user namespace
	// maps its uids and gids 0..UIDRange-1 onto.
	UIDBase uint32
	// Etc is the network's etc template (EtcTemplate): the lower layer of the node's /etc.
	// The init, an unprivileged uid on the host, must be able to reach it by its path.
	Etc string
	// Rootfs is the node's own root directory (absolute, without symbolic links), whose etc
	// template (RootfsEtcTemplate) Etc is; "": the host's root.
	Rootfs string
	// Cgroup is the node's control group, made with its limits; nil: none.
	Cgroup *cgroup.Group
}

// UIDRange is the number of uids and gids a node's user namespace maps.
const UIDRange = nodeinit.UIDRange

// Start creates a node: an init process in new namespaces, marked with marker, set up with cfg.
// It returns the init's pid once the node is ready. The node outlives trellis.
//
// The spawner (spawner.go) makes the node's file system on a thread of its own in a new mount
// namespace and starts the init (package nodeinit) from that thread in the node's user
// namespace; trellis places it in the node's control group before it runs anything of the
// node, and sends it its configuration.
func Start(marker []string, cfg Config, opt Options) (int, error) {
	if opt.UIDBase == 0 || opt.Etc == "" {
		return 0, fmt.Errorf("starting node: %w", ErrNoUIDBase)
	}
	if opt.Rootfs != "" && !filepath.IsAbs(opt.Rootfs) {
		return 0, fmt.Errorf("starting node: %w: %s is not an absolute path", ErrRootfs, opt.Rootfs)
	}
	cfg.UIDBase, cfg.Etc, cfg.Rootfs = opt.UIDBase, opt.Etc, opt.Rootfs
	var err error
	if cfg.Seccomp, err = filterProgram(); err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	p, err := openPipes(opt)
	if err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	defer p.close()
	req := nodeinit.SpawnRequest{Marker: marker, UIDBase: cfg.UIDBase, Etc: cfg.Etc, Rootfs: cfg.Rootfs, TmpfsSize: cfg.TmpfsSize, Cgroup: p.cgroup != nil}
	files := []*os.File{p.conf, p.readyW}
	if p.cgroup != nil {
		files = append(files, p.cgroup)
	}
	pid, err := spawn(req, files)
	p.closeChild()
	if err != nil {
		p.confW.Close()
		return 0, fmt.Errorf("starting node: %w", err)
	}
	err = protectInit(pid)
	if err == nil && opt.Cgroup != nil && p.cgroup == nil {
		err = opt.Cgroup.Place(pid) // cgroup v1: before the init reads its configuration
	}
	if err == nil {
		err = sendConfig(p.confW, cfg)
	} else {
		p.confW.Close()
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
	conf, confW   *os.File // the init's configuration (sendConfig), its stdin
	ready, readyW *os.File // the init's "ok", or an error, on its fd 3
	cgroup        *os.File // cgroup v2: the node's group's directory
}

// closeChild closes trellis's copies of the init's ends.
func (p *initPipes) closeChild() {
	for _, f := range []*os.File{p.conf, p.readyW, p.cgroup} {
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
	p.conf, p.confW, err = os.Pipe()
	if err == nil {
		p.ready, p.readyW, err = os.Pipe()
	}
	if err == nil && opt.Cgroup != nil {
		p.cgroup, err = opt.Cgroup.FD()
	}
	if err != nil {
		p.close()
		if p.confW != nil {
			p.confW.Close()
		}
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
