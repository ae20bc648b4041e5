package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// namespaces a node gets of its own.
const namespaces = syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWPID

// Start creates a node: an init process in new namespaces, marked with marker, set up with cfg.
// It returns the init's pid once the node is ready. The node outlives trellis.
func Start(marker []string, cfg Config) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer ready.Close()
	conf, err := json.Marshal(cfg)
	if err != nil {
		readyW.Close()
		return 0, err
	}
	cmd := &exec.Cmd{
		Path:       self,
		Args:       marker,
		Stdin:      strings.NewReader(string(conf)),
		ExtraFiles: []*os.File{readyW}, // fd 3 in the child
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: namespaces,
			Setsid:     true, // no terminal signals from the shell that ran `trellis up`
		},
		Env: []string{"GOMAXPROCS=1", "GOGC=400"}, // the init mostly sleeps: keep it small
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return 0, fmt.Errorf("starting node: %w", err)
	}
	line, _ := bufio.NewReader(ready).ReadString('\n')
	if line != "ok\n" {
		cmd.Process.Kill()
		cmd.Wait()
		msg := strings.TrimSpace(strings.TrimPrefix(line, "error:"))
		if msg == "" {
			msg = "node init exited before it was ready"
		}
		return 0, fmt.Errorf("starting node: %s", msg)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release() // not waited for: the node lives on after trellis exits
	return pid, nil
}

// Kill ends a node. pid must be a node init found with Find or recorded at Start.
func Kill(pid int) error {
	err := syscall.Kill(pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// WaitGone waits until killed processes have left the process table (or are zombies, whose
// namespaces are released already), at most 10 seconds.
func WaitGone(pids ...int) error {
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(data), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d did not end", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}
