package delay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/helperproc"
	"github.com/trellisnet/trellis/internal/noderuntime"
)

// LineArg0 is the name a delay line runs under; with the arguments after it (LineMarker) it
// marks the process as the line of one port's delay pair of one network, which is how
// trellis finds it again after a crash.
const LineArg0 = "trellis-delayline"

// ErrLine is returned when a delay line cannot be started or ended.
var ErrLine = errors.New("delay line")

// Digest identifies a line's configuration.
func (c LineConfig) Digest() string {
	data, _ := json.Marshal(c) // always marshals
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// LineMarker returns the command line of the delay line of configuration c.
func LineMarker(stateID, netID string, c LineConfig) []string {
	return []string{LineArg0, stateID, netID, c.Hold, c.Digest()}
}

// Lines returns the running delay lines of network netID of state directory stateID, by hold
// end: pid and configuration digest.
func Lines(stateID, netID string) (map[string]noderuntime.Marked, error) {
	return noderuntime.FindMarked(LineArg0, stateID, netID, true)
}

// EnsureLine makes the delay line of configuration c run, unless it runs already: one of
// another configuration is ended first (the frames it held are lost, as when a qdisc is
// replaced).
func EnsureLine(ctx context.Context, stateID, netID string, c LineConfig) error {
	found, err := Lines(stateID, netID)
	if err != nil {
		return err
	}
	if m, ok := found[c.Hold]; ok {
		if m.Digest == c.Digest() {
			return nil
		}
		if err := Kill(m.PID); err != nil {
			return err
		}
	}
	return startLine(ctx, stateID, netID, c)
}

// startLine starts a delay line and waits until its socket is open. It outlives trellis.
func startLine(ctx context.Context, stateID, netID string, c LineConfig) error {
	if _, err := helperproc.Start(ctx, LineMarker(stateID, netID, c), c, 30*time.Second); err != nil {
		return fmt.Errorf("%w on %s: %v", ErrLine, c.Hold, err)
	}
	return nil
}

// Kill ends delay lines and waits until they are gone.
func Kill(pids ...int) error {
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("%w: killing %d: %v", ErrLine, pid, err)
		}
	}
	if err := noderuntime.WaitGone(pids...); err != nil {
		return fmt.Errorf("%w: %v", ErrLine, err)
	}
	return nil
}

// KillExcept ends the delay lines of network netID whose hold end is not in keep (all of them
// with keep nil): `down`, and an `up` that leaves a port undelayed or removes it.
func KillExcept(stateID, netID string, keep map[string]bool) error {
	found, err := Lines(stateID, netID)
	if err != nil {
		return err
	}
	var pids []int
	for hold, m := range found {
		if !keep[hold] {
			pids = append(pids, m.PID)
		}
	}
	return Kill(pids...)
}
