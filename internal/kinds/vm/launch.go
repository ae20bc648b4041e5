package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
)

// monitorWait bounds how long QEMU may take to make the VM and answer on its monitor.
const monitorWait = 2 * time.Minute

// launch starts QEMU in a session of its own and in its control group g (nil: none), with
// files as its descriptors 3, 4, ... and its messages in logPath; waits for its monitor on
// socket (QEMU has then made the VM, opened its files, devices and sockets, and dropped to its
// -runas uid), and starts the guest. It returns QEMU's pid.
//
// QEMU does not daemonize itself (-daemonize forks once QEMU's seccomp filter is installed,
// which spawn=deny forbids): it outlives this trellis (an up) as a child of init, and while
// this trellis runs (serve, agent) it is reaped here when it ends. ctx does not end it.
func launch(ctx context.Context, argv []string, logPath, socket string, files []*os.File, g *cgroup.Group) (int, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	c := exec.Command(QEMU, argv...)
	c.Stdout, c.Stderr, c.ExtraFiles = log, log, files
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if g != nil {
		fd, err := g.FD()
		if err != nil {
			return 0, err
		}
		if fd != nil { // cgroup v2: QEMU starts in its group
			defer fd.Close()
			c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, int(fd.Fd())
		}
	}
	if err := c.Start(); err != nil {
		return 0, fmt.Errorf("%s: %w", QEMU, err)
	}
	ended := make(chan struct{})
	go func() { c.Wait(); close(ended) }()
	pid := c.Process.Pid
	if g != nil {
		if err := g.Place(pid); err != nil {
			c.Process.Kill()
			return 0, fmt.Errorf("QEMU into its cgroup: %w", err)
		}
	}
	m, err := waitMonitor(ctx, socket, ended)
	if err != nil {
		c.Process.Kill() // a QEMU without its monitor is of no use
		out, _ := os.ReadFile(logPath)
		return 0, fmt.Errorf("%s: %w: %s", QEMU, err, strings.TrimSpace(string(out)))
	}
	defer m.Close()
	_, err = m.execute(ctx, "cont", nil)
	return pid, err
}

// waitMonitor connects to QEMU's monitor on socket once QEMU listens there, unless QEMU ends
// first.
func waitMonitor(ctx context.Context, socket string, ended <-chan struct{}) (*qmp, error) {
	ctx, cancel := context.WithTimeout(ctx, monitorWait)
	defer cancel()
	for {
		m, err := dialQMP(ctx, socket)
		if err == nil || !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) {
			return m, err
		}
		select {
		case <-ended:
			return nil, errors.New("it ended while making the VM")
		case <-ctx.Done():
			return nil, fmt.Errorf("no monitor on %s: %w", socket, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
