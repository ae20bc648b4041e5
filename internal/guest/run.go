package guest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// procs reaps every child of the agent (it is PID 1, so daemons that fork away become its
// children too) and hands the exit status of the processes it started to their waiters.
type procs struct {
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
}

func newProcs() *procs {
	p := &procs{waiters: map[int]chan syscall.WaitStatus{}}
	go p.reap()
	return p
}

func (p *procs) reap() {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGCHLD)
	for range sig {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			p.mu.Lock()
			if ch, ok := p.waiters[pid]; ok {
				ch <- ws
				delete(p.waiters, pid)
			}
			p.mu.Unlock()
		}
	}
}

// run starts argv with stdin, stdout and stderr (files) and waits for it; ctx ends it.
func (p *procs) run(ctx context.Context, argv []string, stdin, stdout, stderr *os.File) (int, error) {
	pid, done, err := p.start(argv, []*os.File{stdin, stdout, stderr}, &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		return 127, err
	}
	select {
	case ws := <-done:
		return exitCode(ws), nil
	case <-ctx.Done():
		_ = unix.Kill(-pid, unix.SIGKILL)
		return exitCode(<-done), ctx.Err()
	}
}

// start starts argv with files as its standard input, output and error, and returns its pid
// and where its exit status comes.
func (p *procs) start(argv []string, files []*os.File, sys *syscall.SysProcAttr) (int, <-chan syscall.WaitStatus, error) {
	path := argv[0]
	if !strings.Contains(path, "/") {
		var err error
		if path, err = lookPath(path); err != nil {
			return 0, nil, err
		}
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	ch := make(chan syscall.WaitStatus, 1)
	p.mu.Lock() // held until the waiter is registered: the reaper cannot see the exit first
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   []string{"PATH=" + searchPath, "HOME=/root", "TERM=xterm"},
		Files: fds,
		Sys:   sys,
	})
	if err == nil {
		p.waiters[pid] = ch
	}
	p.mu.Unlock()
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	return pid, ch, nil
}

// exitCode is a shell's $? for a wait status.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

const searchPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func lookPath(name string) (string, error) {
	for _, dir := range strings.Split(searchPath, ":") {
		path := dir + "/" + name
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}
