package delay

import (
	"context"
	"errors"
	"time"

	"github.com/trellisnet/trellis/internal/helperproc/marked"
	"github.com/trellisnet/trellis/internal/noderuntime"
)

// LineArg0 is the name a delay line runs under; with the arguments after it (its marker) it
// marks the process as the line of one port's delay pair of one network, which is how
// trellis finds it again after a crash.
const LineArg0 = "trellis-delayline"

// ErrLine is returned when a delay line cannot be started or ended.
var ErrLine = errors.New("delay line")

// lines is the kind of helper a delay line is.
var lines = marked.Kind{Arg0: LineArg0, Err: ErrLine, Timeout: 30 * time.Second}

// Digest identifies a line's configuration.
func (c LineConfig) Digest() string { return marked.Digest(c) }

// Lines returns the running delay lines of network netID of state directory stateID, by hold
// end: pid and configuration digest.
func Lines(stateID, netID string) (map[string]noderuntime.Marked, error) {
	return lines.Find(stateID, netID)
}

// EnsureLine makes the delay line of configuration c run, unless it runs already: one of
// another configuration is ended first (the frames it held are lost, as when a qdisc is
// replaced). The line outlives trellis.
func EnsureLine(ctx context.Context, stateID, netID string, c LineConfig) error {
	return lines.Ensure(ctx, stateID, netID, c.Hold, c, "on "+c.Hold)
}

// KillExcept ends the delay lines of network netID whose hold end is not in keep (all of them
// with keep nil): `down`, and an `up` that leaves a port undelayed or removes it.
func KillExcept(stateID, netID string, keep map[string]bool) error {
	return lines.KillExcept(stateID, netID, keep)
}

// KillExceptIn is KillExcept among processes pids only (nil: every process).
func KillExceptIn(pids []int, stateID, netID string, keep map[string]bool) error {
	return lines.KillExceptIn(pids, stateID, netID, keep)
}
