package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// perfControl is the pair of FIFOs through which `perf record --control` takes commands
// ("enable") and acknowledges them ("ack").
type perfControl struct {
	ctlPath, ackPath string
}

// newPerfControl makes the two FIFOs in dir.
func newPerfControl(dir, name string) (*perfControl, error) {
	c := &perfControl{ctlPath: filepath.Join(dir, "perf-"+name+".ctl"), ackPath: filepath.Join(dir, "perf-"+name+".ack")}
	for _, p := range []string{c.ctlPath, c.ackPath} {
		os.Remove(p)
		if err := unix.Mkfifo(p, 0o600); err != nil {
			c.close()
			return nil, fmt.Errorf("perf control fifo: %w", err)
		}
	}
	return c, nil
}

// enable tells perf to enable its events and waits for its acknowledgement, at most timeout
// (or until ctx is done). Both FIFOs are opened read-write, which never blocks, so that nothing
// waits for perf to open its ends; the wait is a read deadline, so nothing is left blocked.
func (c *perfControl) enable(ctx context.Context, timeout time.Duration) error {
	ctl, err := os.OpenFile(c.ctlPath, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer ctl.Close()
	ack, err := os.OpenFile(c.ackPath, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer ack.Close()
	if _, err := ctl.WriteString("enable\n"); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ack.SetReadDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { ack.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 16)
	n, err := ack.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errors.New("perf did not enable its events in time")
	}
	// perf writes "ack\n" and the string's terminating NUL.
	if err == nil && !strings.HasPrefix(string(buf[:n]), "ack\n") {
		err = fmt.Errorf("perf answered %q to enable", buf[:n])
	}
	return err
}

// close removes the FIFOs.
func (c *perfControl) close() {
	os.Remove(c.ctlPath)
	os.Remove(c.ackPath)
}
