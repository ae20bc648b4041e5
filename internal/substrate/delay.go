package substrate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/delay"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The ways a machine delays frames (docs/architecture.md, "Delay and jitter").
const (
	wayNetem = "netem"
	wayLine  = "delay line"
)

// DelayEnv names the environment variable from which the command line takes Options.Delay.
const DelayEnv = "TRELLIS_DELAY"

// ErrNoDelay is returned for delays on a machine that has neither way.
var ErrNoDelay = errors.New("delay and jitter need the kernel's netem queueing discipline (sch_netem) or eBPF on tc (for trellis's delay line)")

// delayWay chooses how this machine delays frames: netem where the kernel has it (built in or
// loadable: adding the qdisc loads the module), else the delay line, which needs tc eBPF;
// opt.Delay may ask for one of them.
func delayWay(opt Options) (string, error) {
	want := opt.Delay
	switch want {
	case "", "netem", "line":
	default:
		return "", fmt.Errorf("delay way %q (--delay, %s): use netem or line", want, DelayEnv)
	}
	if want != "line" && netemAvailable() {
		return wayNetem, nil
	}
	if want == "netem" {
		return "", fmt.Errorf("%s=netem: %w", DelayEnv, delay.ErrNoNetem)
	}
	if _, err := opt.Dataplane.Hook(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoDelay, err)
	}
	return wayLine, nil
}

// delayWayText says how this machine delays frames, for `up` and `diff`, asked for by delay
// (Options.Delay).
func delayWayText(way, delay string) string {
	switch {
	case way == wayNetem:
		return "delay and jitter by netem"
	case delay == "line":
		return "delay and jitter by trellis's delay line (" + DelayEnv + "=line)"
	}
	return "delay and jitter by trellis's delay line (this kernel has no netem)"
}

// hasDelay tells whether plan p delays any frames.
func hasDelay(p *plan.Plan) bool {
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Impair.Delays() {
				return true
			}
		}
	}
	return false
}

// noteDelays says how this machine applies plan p's delays (preflight checked it can): on the
// changes of links with delays, and in opt.Log (nil: nowhere).
func noteDelays(changes []Change, p *plan.Plan, opt Options) {
	if !hasDelay(p) {
		return
	}
	way, err := delayWay(opt)
	if err != nil {
		return
	}
	text := delayWayText(way, opt.Delay)
	logline.OrDiscard(opt.Log).Info(text, "delay", way)
	for i, c := range changes {
		if l := p.Link(c.Name); c.Object == "link" && c.Op != "remove" && l != nil {
			for _, port := range l.Ports {
				if port.Impair.Delays() {
					changes[i].What = append(changes[i].What, text)
					break
				}
			}
		}
	}
}

// delaySettings are the delay settings of an impairment.
func delaySettings(im spec.Impairment) delay.Settings {
	return delay.Settings{Delay: im.Delay, Jitter: im.Jitter, Distribution: im.Distribution}
}

// setDelay makes the frames port's node sends go through a delay, or straight on again: its
// delay pair (made with the port's MTU), netem on the pair's hold end or a delay line on it,
// and the programs that send the frames there and back. made says the port was just made.
func (a *applier) setDelay(ctx context.Context, port plan.Port, dev netlink.Link, made bool) error {
	hold, ret := plan.DelayPair(port.Name)
	if !port.Impair.Delays() {
		if made || !a.wasDelayed(port) {
			return nil
		}
		if err := a.m.DetachDelay(dev.Attrs().Index); err != nil {
			return err
		}
		return a.m.DeleteDevice(hold) // its line ends with it, and the sweep finds one left
	}
	way, err := delayWay(a.opt)
	if err != nil {
		return err
	}
	h, r, err := delayPair(hold, ret, dev.Attrs().MTU)
	if err != nil {
		return err
	}
	s := delaySettings(port.Impair)
	if way == wayNetem {
		if err := a.m.EndLinesExcept(nil, a.env.Store.ID, a.env.Plan.NetID, otherDevices(a.env.Plan, hold)); err != nil {
			return err
		}
		if err := delay.SetNetem(h, s); err != nil {
			return err
		}
		return dataplane.AttachDelay(a.opt.Dataplane, dev.Attrs().Index, h, r, dataplane.HoldEgress)
	}
	if err := noRootQdisc(h); err != nil {
		return err
	}
	if err := delay.EnsureLine(ctx, a.env.Store.ID, a.env.Plan.NetID, delay.LineConfig{Hold: hold, Settings: s}); err != nil {
		return err
	}
	return dataplane.AttachDelay(a.opt.Dataplane, dev.Attrs().Index, h, r, dataplane.HoldIngress)
}

// wasDelayed tells whether a port that exists may have a delay to undo: the last plan delayed
// it, or what the last apply left is not known (an interrupted change). A port just made has
// none; a pair left over is not among the plan's devices, and apply deletes it.
func (a *applier) wasDelayed(port plan.Port) bool {
	if a.old == nil || a.listed {
		return true
	}
	op := oldPort(a.old, port)
	return op != nil && op.Impair.Delays()
}

// delayPair makes a port's delay pair unless it exists, and returns the ifindexes of its ends.
func delayPair(hold, ret string, mtu int) (int, int, error) {
	dev, err := netdev.ByName(hold)
	if err == nil && dev == nil {
		err = netdev.Add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hold, MTU: mtu}, PeerName: ret})
	}
	if err != nil {
		return 0, 0, fmt.Errorf("delay pair %s: %w", hold, err)
	}
	var idx [2]int
	for i, name := range []string{hold, ret} {
		d, err := netdev.UpQuiet(name)
		if err != nil {
			return 0, 0, fmt.Errorf("delay pair: %w", err)
		}
		if d.Attrs().MTU != mtu {
			if err := netdev.Do(func(h *netlink.Handle) error { return h.LinkSetMTU(d, mtu) }); err != nil {
				return 0, 0, fmt.Errorf("delay pair %s: %w", name, err)
			}
		}
		idx[i] = d.Attrs().Index
	}
	return idx[0], idx[1], nil
}

// noRootQdisc removes a qdisc left at the root of device ifindex (netem, before the way
// changed): the delay line's frames must leave at once.
func noRootQdisc(ifindex int) error {
	err := netdev.Do(func(h *netlink.Handle) error {
		return h.QdiscDel(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_ROOT}, QdiscType: "netem"})
	})
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("removing the qdisc of the delay pair: %w", err)
	}
	return nil
}

// delayDevices returns the ends of the delay pairs of plan p's delayed ports.
func delayDevices(p *plan.Plan) map[string]bool {
	out := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Impair.Delays() {
				hold, ret := plan.DelayPair(port.Name)
				out[hold], out[ret] = true, true
			}
		}
	}
	return out
}

// otherDevices is delayDevices without hold.
func otherDevices(p *plan.Plan, hold string) map[string]bool {
	out := delayDevices(p)
	delete(out, hold)
	return out
}

// convergeLines ends the delay lines of the network that the plan no longer has, and starts
// again those of its delayed ports that are missing or differ (killed, or lost with a restart
// of the machine; their frames go nowhere until then). With a shared listing (Env.Listed) it
// looks for the lines among the network's processes there: the lines this apply started are
// the plan's, which stay.
func (a *applier) convergeLines(ctx context.Context) error {
	if err := a.m.EndLinesExcept(a.env.Listed.Processes(), a.env.Store.ID, a.env.Plan.NetID, delayDevices(a.env.Plan)); err != nil {
		return err
	}
	missing, err := missingLines(a.env.Store.ID, a.env.Plan, a.opt)
	if err != nil {
		return err
	}
	for _, c := range missing {
		if err := delay.EnsureLine(ctx, a.env.Store.ID, a.env.Plan.NetID, c.line); err != nil {
			return fmt.Errorf("link %s: %w", c.link, err)
		}
	}
	return nil
}

// lineWant is a delay line plan p wants that does not run as it should.
type lineWant struct {
	link string
	line delay.LineConfig
}

// missingLines lists the delay lines plan p needs on this machine that do not run with their
// configuration (none where the way is netem).
func missingLines(stateID string, p *plan.Plan, opt Options) ([]lineWant, error) {
	if !hasDelay(p) {
		return nil, nil
	}
	if way, err := delayWay(opt); err != nil || way != wayLine {
		return nil, nil
	}
	found, err := delay.Lines(stateID, p.NetID)
	if err != nil {
		return nil, err
	}
	var out []lineWant
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if !port.Impair.Delays() {
				continue
			}
			hold, _ := plan.DelayPair(port.Name)
			c := delay.LineConfig{Hold: hold, Settings: delaySettings(port.Impair)}
			if m, ok := found[hold]; !ok || m.Digest != c.Digest() {
				out = append(out, lineWant{link: l.Name, line: c})
			}
		}
	}
	return out, nil
}

// lineChanges are the changes `up` and `diff` show for delay lines that do not run as they
// should, in a plan that is otherwise unchanged.
func lineChanges(stateID string, old, p *plan.Plan, opt Options) ([]Change, error) {
	missing, err := missingLines(stateID, p, opt)
	if err != nil || old == nil {
		return nil, err
	}
	var out []Change
	said := map[string]bool{}
	for _, m := range missing {
		if ol := old.Link(m.link); ol != nil && !said[m.link] && sameLink(ol, p.Link(m.link)) {
			said[m.link] = true
			out = append(out, Change{Op: "change", Object: "link", Name: m.link, What: []string{"its delay line is not running: started again"}})
		}
	}
	return out, nil
}

// checkDelays refuses the delays of plan p on a machine with no way to apply them, naming
// each link and field, and the kernel.
func checkDelays(p *plan.Plan, n *spec.Network, opt Options) spec.Errors {
	if !hasDelay(p) {
		return nil
	}
	_, err := delayWay(opt)
	if err == nil {
		return nil
	}
	var errs spec.Errors
	said := map[string]bool{}
	for _, l := range p.Links {
		sl := specLink(n, l.Name)
		for _, port := range l.Ports {
			field := "delay"
			if _, ok := sl.From[port.String()]; ok {
				field = "from." + port.String()
			}
			if !port.Impair.Delays() || said[l.Name+" "+field] {
				continue
			}
			said[l.Name+" "+field] = true
			errs = append(errs, n.LinkError(sl, field, fmt.Sprintf("%v (kernel %s)", err, kernelRelease()),
				"use a kernel with sch_netem (Debian and Ubuntu ship it as a module), or remove delay and jitter from this link"))
		}
	}
	return errs
}

// kernelRelease is the running kernel's release, for messages.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return strings.TrimRight(string(u.Release[:]), "\x00")
}
