package substrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// ErrNoNetwork is returned when the state directory has no network of the name given.
var ErrNoNetwork = errors.New("no network named")

// ErrNotUp is returned for a live change to a network whose creation or last change was
// interrupted.
var ErrNotUp = errors.New("the network is not up")

// ErrNoLink is returned when a network has no link (or endpoint) of the name given.
var ErrNoLink = errors.New("no such link")

// SetLinkState takes the carrier of link linkName of a running network away (up false) or
// gives it back: from every endpoint on this machine, or, with endpoint ("NODE:IF"), from that
// one alone. The nodes see NO-CARRIER on their interfaces, as with a pulled cable; nothing else
// changes. The new state stays until the next `up` of the file, which applies the file's. A
// direct link taken down is re-plugged to ports, as opt allows (checkReplug).
func SetLinkState(ctx context.Context, st *state.Store, network, linkName, endpoint string, up bool, opt Options) error {
	return changeLink(ctx, st, network, linkName, opt, func(l *plan.Link) error { return setDown(l, endpoint, !up) })
}

// SetImpairment sets the impairment (loss, duplication, corruption, delay, jitter) of link
// linkName of a running network, live: of the frames every endpoint on this machine sends, or,
// with endpoint ("NODE:IF"), of the frames that one endpoint sends, the other directions
// unchanged. A zero im removes the impairment. Delays on a machine with no way to apply them
// are refused, as up refuses them. The new impairment stays until the next `up` of the file,
// which applies the file's. A direct link impaired is re-plugged to ports, as opt allows.
func SetImpairment(ctx context.Context, st *state.Store, network, linkName, endpoint string, im spec.Impairment, opt Options) error {
	if im.Delays() {
		if _, err := delayWay(opt); err != nil {
			return fmt.Errorf("network %s: link %s: %w (kernel %s)", network, linkName, err, kernelRelease())
		}
	}
	return changeLink(ctx, st, network, linkName, opt, func(l *plan.Link) error { return setImpair(l, endpoint, im) })
}

// changeLink changes link linkName of a running network on this machine as edit changes its
// plan, live, through the reconciler: only that link's ports are touched (apply joins a link
// whose plan changed and leaves the others alone). If the change fails, the network is taken
// back to what it was. A re-plug (PlugPorts) is refused as opt says (checkReplug).
func changeLink(ctx context.Context, st *state.Store, network, linkName string, opt Options, edit func(*plan.Link) error) error {
	unlock, err := st.Lock(network)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := st.Load(network)
	if err != nil {
		return err
	}
	if rec == nil {
		st.Delete(network) // the lock file just made
		return fmt.Errorf("%w %s in %s", ErrNoNetwork, network, st.Dir)
	}
	if rec.Status != state.Up {
		return fmt.Errorf("network %s: %w (it is %s): run `trellis up` with its file first", network, ErrNotUp, rec.Status)
	}
	p, err := copyPlan(rec.Plan)
	if err != nil {
		return err
	}
	l := p.Link(linkName)
	if l == nil {
		return fmt.Errorf("network %s: %w %q on this machine (see `trellis link %s`)", network, ErrNoLink, linkName, network)
	}
	if err := edit(l); err != nil {
		return fmt.Errorf("network %s: link %s: %w", network, linkName, err)
	}
	p.PlugPorts() // a direct link taken down or impaired gets its ports
	old := rec.Plan
	if replugsAny(old, p) {
		running, err := findNodes(machineFrom(ctx), &kinds.Env{Store: st, Plan: p})
		if err != nil {
			return err
		}
		if err := checkReplug(rec, old, p, running, opt); err != nil {
			return err
		}
		noteReplugs(old, p, opt.Log)
	}
	if err := st.MarkChanging(network); err != nil { // if interrupted, the next up trusts only the kernel
		return err
	}
	if err := apply(ctx, opt.env(st, p), old, rec, nil, opt); err != nil {
		return rollback(ctx, st, rec, old, p, opt, err)
	}
	return nil
}

// setImpair sets the impairment of the frames every endpoint of a link sends, or one endpoint.
func setImpair(l *plan.Link, endpoint string, im spec.Impairment) error {
	found := false
	for i := range l.Ports {
		if endpoint == "" || l.Ports[i].String() == endpoint {
			l.Ports[i].Impair, found = im, true
		}
	}
	if !found {
		return fmt.Errorf("%w: it has no endpoint %s on this machine", ErrNoLink, endpoint)
	}
	return nil
}

// setDown sets the carrier of a whole link, or of one endpoint of it.
func setDown(l *plan.Link, endpoint string, down bool) error {
	if endpoint == "" {
		l.Down = down
		for i := range l.Ports {
			l.Ports[i].Down = false
		}
		return nil
	}
	for i := range l.Ports {
		if l.Ports[i].String() == endpoint {
			l.Ports[i].Down = down
			return nil
		}
	}
	return fmt.Errorf("%w: it has no endpoint %s on this machine", ErrNoLink, endpoint)
}

// copyPlan returns a deep copy of a plan.
func copyPlan(p *plan.Plan) (*plan.Plan, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var c plan.Plan
	return &c, json.Unmarshal(data, &c)
}
