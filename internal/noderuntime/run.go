package noderuntime

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// MaxOutput bounds what Run keeps of each of a command's stdout and stderr; the rest is
// dropped and the result says so.
const MaxOutput = 16 << 20

// Result is how a command run by Run ended.
type Result struct {
	ExitCode  int // 128+N if signal N ended it
	Stdout    string
	Stderr    string
	TimedOut  bool // it ran past its timeout and was killed
	Truncated bool // stdout or stderr was longer than MaxOutput and was cut
	Seconds   float64
}

// Run runs argv in the node whose init is pid (as Command does), with stdin as its standard
// input, until it exits, timeout passes or ctx ends; then it and everything it started are
// killed. A command that fails is a Result with its exit code, not an error.
func Run(ctx context.Context, pid int, argv []string, stdin string, timeout time.Duration) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := Command(pid, argv...)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	cmd.Env = c.Env
	var stdout, stderr capped
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 500 * time.Millisecond
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	err = cmd.Wait()
	res := &Result{Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.cut || stderr.cut,
		Seconds: time.Since(start).Seconds(), TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = cmd.ProcessState.ExitCode()
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	default:
		return nil, err
	}
	return res, nil
}

// capped keeps the first MaxOutput bytes written to it.
type capped struct {
	bytes.Buffer
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := MaxOutput - c.Len(); len(p) > room {
		c.cut = true
		c.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
