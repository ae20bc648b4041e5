// Package helperproc starts trellis's helper processes: trellis re-executed with a marker
// command line (the engines helper of a node, a port's delay line), in a session of its own so
// that it outlives trellis, its configuration as JSON on stdin. A helper says "ok" on its fd 3
// once it is ready, or "error: WHY" and exits; Start waits for that. Executable is the binary
// that every re-execution of trellis runs (these helpers, node.Command, a VM guest's agent).
package helperproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// executable is the trellis binary that re-executions run; "": this program.
var executable string

// SetExecutable makes path, a trellis binary, what Executable returns instead of this
// program. A command that calls trellis's packages without being trellis (trellis-bench)
// sets it at its start, before it starts anything.
func SetExecutable(path string) { executable = path }

// Executable returns the trellis binary to re-execute: the one SetExecutable named, or this
// program.
func Executable() (string, error) {
	if executable != "" {
		return executable, nil
	}
	return os.Executable()
}

// Start starts trellis with the command line args (args[0] included, the helper's marker) and
// conf on its stdin, and returns the helper's pid once it said "ok". If it cannot be started,
// says an error, exits, or is not ready within timeout or before ctx ends, it is killed and
// the error says why. The process is released: nothing waits for it.
func Start(ctx context.Context, args []string, conf any, timeout time.Duration) (int, error) {
	self, err := Executable()
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(conf)
	if err != nil {
		return 0, err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer ready.Close()
	cmd := &exec.Cmd{
		Path:        self,
		Args:        args,
		Stdin:       strings.NewReader(string(data)),
		ExtraFiles:  []*os.File{readyW}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		Env:         []string{"GOMAXPROCS=2"},
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return 0, fmt.Errorf("starting: %w", err)
	}
	done := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(ready).ReadString('\n')
		done <- line
	}()
	var line string
	select {
	case line = <-done:
	case <-ctx.Done():
		line = "error: " + ctx.Err().Error()
	case <-time.After(timeout):
		line = fmt.Sprintf("error: not ready after %v", timeout)
	}
	if line != "ok\n" {
		cmd.Process.Kill()
		cmd.Wait()
		msg := strings.TrimSpace(strings.TrimPrefix(line, "error:"))
		if msg == "" {
			msg = "it exited before it was ready"
		}
		return 0, errors.New(msg)
	}
	pid := cmd.Process.Pid
	return pid, cmd.Process.Release()
}
