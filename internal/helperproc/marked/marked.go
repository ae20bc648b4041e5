// Package marked keeps trellis's helper processes of one kind running as configured, one per
// key of a network (a port's delay line, a programmable node's table server, a node's engines):
// each is found again by its command line, its marker (the kind's name, the state directory's
// id, the network's id, the key and its configuration's digest), started by helperproc, and
// ended. A helper whose configuration changed is ended and started again.
package marked

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/helperproc"
	"github.com/trellisnet/trellis/internal/noderuntime"
)

// Kind is one kind of helper.
type Kind struct {
	Arg0    string        // the name its processes run under, the first word of their marker
	Err     error         // the sentinel its failures wrap
	Timeout time.Duration // how long a start may take before the helper is ready
}

// Digest identifies a helper's configuration c in its marker.
func Digest(c any) string {
	data, _ := json.Marshal(c) // configurations are plain data: they always marshal
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// Marker returns the command line of the helper of key in network netID of state directory
// stateID, configured by c.
func (k Kind) Marker(stateID, netID, key string, c any) []string {
	return []string{k.Arg0, stateID, netID, key, Digest(c)}
}

// Find returns the running helpers of network netID of state directory stateID, by key: pid
// and configuration digest.
func (k Kind) Find(stateID, netID string) (map[string]noderuntime.Marked, error) {
	return noderuntime.FindMarked(k.Arg0, stateID, netID, true)
}

// Ensure makes the helper of key run, configured by c, unless it runs already; one of another
// configuration is ended first. what names the helper in an error ("on eth1", "of node s1").
func (k Kind) Ensure(ctx context.Context, stateID, netID, key string, c any, what string) error {
	found, err := k.Find(stateID, netID)
	if err != nil {
		return err
	}
	if m, ok := found[key]; ok {
		if m.Digest == Digest(c) {
			return nil
		}
		if err := k.Kill(m.PID); err != nil {
			return err
		}
	}
	if _, err := helperproc.Start(ctx, k.Marker(stateID, netID, key, c), c, k.Timeout); err != nil {
		return fmt.Errorf("%w %s: %v", k.Err, what, err)
	}
	return nil
}

// Kill ends helpers and waits until they are gone.
func (k Kind) Kill(pids ...int) error {
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("%w: killing %d: %v", k.Err, pid, err)
		}
	}
	if err := noderuntime.WaitGone(pids...); err != nil {
		return fmt.Errorf("%w: %v", k.Err, err)
	}
	return nil
}

// KillExcept ends the helpers of network netID whose key is not in keep (all of them with keep
// nil).
func (k Kind) KillExcept(stateID, netID string, keep map[string]bool) error {
	return k.KillExceptIn(nil, stateID, netID, keep)
}

// KillExceptIn is KillExcept among processes pids only (nil: every process), for a caller that
// knows every process the network could have (kinds.Env.Listed).
func (k Kind) KillExceptIn(pids []int, stateID, netID string, keep map[string]bool) error {
	found, err := noderuntime.FindMarkedIn(pids, k.Arg0, stateID, netID, true)
	if err != nil {
		return err
	}
	var kill []int
	for key, m := range found {
		if !keep[key] {
			kill = append(kill, m.PID)
		}
	}
	return k.Kill(kill...)
}
