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

// enable tells perf to enable its events and waits for its acknowledgement, at most timeout.
// Opening the FIFOs blocks until perf opens its ends, which it does once it is set up.
func (c *perfControl) enable(ctx context.Context, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		ctl, err := os.OpenFile(c.ctlPath, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		defer ctl.Close()
		ack, err := os.OpenFile(c.ackPath, os.O_RDONLY, 0)
		if err != nil {
			done <- err
			return
		}
		defer ack.Close()
		if _, err := ctl.WriteString("enable\n"); err != nil {
			done <- err
			return
		}
		buf := make([]byte, 16)
		n, err := ack.Read(buf)
		// perf writes "ack\n" and the string's terminating NUL.
		if err == nil && !strings.HasPrefix(string(buf[:n]), "ack\n") {
			err = fmt.Errorf("perf answered %q to enable", buf[:n])
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		c.unblock()
		return ctx.Err()
	case <-time.After(timeout):
		c.unblock()
		return errors.New("perf did not enable its events in time")
	}
}

// unblock opens the FIFOs' other ends so that a goroutine blocked opening them returns.
func (c *perfControl) unblock() {
	if f, err := os.OpenFile(c.ctlPath, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
	if f, err := os.OpenFile(c.ackPath, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

// close removes the FIFOs.
func (c *perfControl) close() {
	os.Remove(c.ctlPath)
	os.Remove(c.ackPath)
}
