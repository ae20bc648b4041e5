package substrate

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrReplug is returned for a live change that would re-plug a link (from one veth pair to
// ports or back: its nodes' interfaces made anew) whose interfaces carry what the nodes'
// software made (decision 15): the change is refused, nothing changed, unless asked with
// Options.Replug.
var ErrReplug = errors.New("re-plugging would take away what the nodes' software made")

// ReplugFix is how to make a refused re-plug go.
const ReplugFix = "a point-to-point link that names no connector is one veth pair while it has nothing to enforce: name `connector: shortbridge` on links you impair live (they keep their ports, never re-plugged), or accept the flap with --replug"

// Options are a live change's choices.
type Options struct {
	// Replug lets a change re-plug a link whose interfaces carry what the nodes' software
	// made (it goes, and the change says so); without it, such a change is refused.
	Replug bool
	// Log gets the operation's progress (Info: `up -v`) and what it tells always (Warn: what
	// a change allowed by Replug took away, a link that keeps its ports). nil: nowhere.
	Log *slog.Logger
	// PortNS is where a new network's ports live (portns.go): "root" (the root namespace; also
	// when empty), "auto" (a namespace of the network's own where it can, else the root
	// namespace) or "network" (a namespace of its own, refusing a network that cannot have one).
	PortNS string
	// Delay is how delays are applied on a kernel that has netem: "line" takes trellis's
	// delay line instead, "netem" refuses a kernel without netem rather than falling back to
	// the line; empty: netem where the kernel has it, else the line.
	Delay string
	// Dataplane is how programs are attached to ports (kinds.Env.Dataplane).
	Dataplane dataplane.Config
	// ImageCache is where images are kept ("": image.DefaultCache); Mirrors are the registry
	// mirrors tried first for Docker Hub's images (oci.Store.Mirrors).
	ImageCache string
	Mirrors    []string
	// created: the apply creates the network (create), the only one that may make its port
	// namespace.
	created bool
}

// env is the kinds' environment for plan p of the network in st.
func (o Options) env(st *state.Store, p *plan.Plan) *kinds.Env {
	return &kinds.Env{Store: st, Plan: p, Log: o.Log, Dataplane: o.Dataplane, ImageCache: o.ImageCache}
}

// ifaceSoft is what the software of a node made on one interface (inside its namespace).
type ifaceSoft struct {
	Addrs  []netlink.Addr
	Routes []netlink.Route
	Rules  []netlink.Rule
	Qdiscs []netlink.Qdisc
}

// softMade classifies what is on interface (index ifindex, name ifname) of a node: the
// addresses not among placed (those trellis put there) and not an IPv6 link-local fe80::/64
// one (the kernel's: one a user adds with that prefix is not told apart), the routes through it in any table whose protocol is not the kernel's, the rules naming
// it, and a root qdisc other than the kernel's default (handle 0:) or an ingress/clsact qdisc.
func softMade(ifindex int, ifname string, placed []string, s ifaceSoft) []string {
	own := map[string]bool{}
	for _, a := range placed {
		if ip, _, err := net.ParseCIDR(a); err == nil {
			own[ip.String()] = true
		}
	}
	var addrs []string
	for _, a := range s.Addrs {
		if ones, _ := a.Mask.Size(); a.IPNet == nil || own[a.IP.String()] || (a.IP.IsLinkLocalUnicast() && ones == 64) {
			continue
		}
		addrs = append(addrs, a.IPNet.String())
	}
	protos := map[string]int{}
	var order []string
	for _, r := range s.Routes {
		if r.Protocol == unix.RTPROT_KERNEL || !through(r, ifindex) {
			continue
		}
		p := r.Protocol.String()
		if protos[p] == 0 {
			order = append(order, p)
		}
		protos[p]++
	}
	var out []string
	if len(addrs) > 0 {
		out = append(out, strings.Join(addrs, ", "))
	}
	for _, p := range order {
		out = append(out, fmt.Sprintf("%d %s (proto %s)", protos[p], plural(protos[p], "route"), p))
	}
	rules := 0
	for _, r := range s.Rules {
		if r.IifName == ifname || r.OifName == ifname {
			rules++
		}
	}
	if rules > 0 {
		out = append(out, fmt.Sprintf("%d %s", rules, plural(rules, "rule")))
	}
	for _, q := range s.Qdiscs {
		at := q.Attrs()
		switch {
		case at.Parent == netlink.HANDLE_INGRESS: // ingress and clsact alike
			out = append(out, "a "+q.Type()+" qdisc")
		case at.Parent == netlink.HANDLE_ROOT && at.Handle != 0:
			out = append(out, "a root "+q.Type()+" qdisc")
		}
	}
	return out
}

// through tells whether route r goes out of interface ifindex, itself or by one of its hops.
func through(r netlink.Route, ifindex int) bool {
	if r.LinkIndex == ifindex {
		return true
	}
	for _, h := range r.MultiPath {
		if h.LinkIndex == ifindex {
			return true
		}
	}
	return false
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// readSoft reads what is on interface ifname in namespace ns; found is false if it is not there.
func readSoft(ns netns.NsHandle, ifname string) (idx int, s ifaceSoft, found bool, err error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return 0, s, false, err
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return 0, s, false, nil // not there: nothing to lose
	}
	idx = link.Attrs().Index
	if s.Addrs, err = h.AddrList(link, netlink.FAMILY_ALL); err != nil {
		return idx, s, true, fmt.Errorf("addresses of %s: %w", ifname, err)
	}
	if s.Routes, err = h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE); err != nil {
		return idx, s, true, fmt.Errorf("routes: %w", err)
	}
	if s.Rules, err = h.RuleList(netlink.FAMILY_ALL); err != nil {
		return idx, s, true, fmt.Errorf("rules: %w", err)
	}
	if s.Qdiscs, err = h.QdiscList(link); err != nil {
		return idx, s, true, fmt.Errorf("qdiscs of %s: %w", ifname, err)
	}
	return idx, s, true, nil
}

// replugsAny tells whether the change from old to p re-plugs a link (Wired changes).
func replugsAny(old, p *plan.Plan) bool {
	for _, l := range p.Links {
		if ol := old.Link(l.Name); ol != nil && Wired(ol) != Wired(l) {
			return true
		}
	}
	return false
}

// replugs lists, for each link that the change from old to p re-plugs (Wired changes), what
// the software of its running nodes made on its interfaces, as "link L: NODE:IF has WHAT".
func replugs(rec *state.Record, old, p *plan.Plan, running map[string]kinds.Instance) ([]string, error) {
	if old == nil {
		return nil, nil
	}
	var out []string
	for _, l := range p.Links {
		ol := old.Link(l.Name)
		if ol == nil || Wired(ol) == Wired(l) {
			continue
		}
		for _, port := range ol.Ports {
			what, err := portSoft(rec, p, port, running)
			if err != nil {
				return nil, fmt.Errorf("link %s: %w", l.Name, err)
			}
			if len(what) > 0 {
				out = append(out, fmt.Sprintf("link %s: %s has %s that its software made%s", l.Name, port, strings.Join(what, " and "), replugWhy(ol, l)))
			}
		}
	}
	return out, nil
}

// replugWhy says why a direct link goes to ports when only the kernel makes it: a link taken
// down or impaired stays one veth pair on a kernel with tcx (plan.WireEnforces).
func replugWhy(old, l *plan.Link) string {
	if Wired(old) && !Wired(l) && !plan.WireEnforces() && !l.NeedsPortsAlways() {
		return " (it goes to ports: " + NoTCX + "; kernel " + dataplane.KernelRelease() + ")"
	}
	return ""
}

// portSoft is what the software of a running node made on a port's interface.
func portSoft(rec *state.Record, p *plan.Plan, port plan.Port, running map[string]kinds.Instance) ([]string, error) {
	in, ok := running[port.Node]
	n := p.Node(port.Node)
	if !ok || n == nil {
		return nil, nil // it starts anew
	}
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return nil, err
	}
	nk, ok := k.(kinds.Namespaced)
	if !ok {
		return nil, nil
	}
	ns, err := nk.Netns(in)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	idx, s, found, err := readSoft(ns, port.Ifname)
	if err != nil || !found {
		return nil, err
	}
	var placed []string
	for _, rp := range append([]*plan.Plan{rec.Plan, p}, recorded(rec, p)...) {
		if rp == nil {
			continue
		}
		if op := oldPort(rp, port); op != nil {
			placed = append(placed, op.Addresses...)
		}
	}
	return softMade(idx, port.Ifname, placed, s), nil
}

// checkReplug refuses a change that re-plugs links whose interfaces carry what the nodes'
// software made, unless opt allows it; allowed, it writes what goes to opt.Out.
func checkReplug(rec *state.Record, old, p *plan.Plan, running map[string]kinds.Instance, opt Options) error {
	found, err := replugs(rec, old, p, running)
	if err != nil || len(found) == 0 {
		return err
	}
	if !opt.Replug {
		return fmt.Errorf("network %s: %w: %s", p.Network, ErrReplug, refusal(found))
	}
	for _, f := range found {
		logline.OrDiscard(opt.Log).Warn(fmt.Sprintf("re-plugged (--replug): %s; it went with the interface", f), "replugged", f)
	}
	return nil
}

// noteReplugs says to log which links the change from old to p re-plugs, what their nodes
// see and how a file keeps a link from it: nothing of the nodes' software goes with them.
func noteReplugs(old, p *plan.Plan, log *slog.Logger) {
	for _, l := range p.Links {
		if ol := old.Link(l.Name); ol != nil {
			if r := replugged(ol, l); r != "" {
				logline.OrDiscard(log).Warn(fmt.Sprintf("link %s: %s", l.Name, r), "replugged", l.Name)
			}
		}
	}
}

// refusal says what a refused re-plug would take away, and how to make it go.
func refusal(found []string) string {
	return fmt.Sprintf("%s: it would go with the interfaces, made anew (decision 15). %s", strings.Join(found, "; "), ReplugFix)
}

// keepPorts keeps the ports of each link of n that has them (old) and that p would join as
// one veth pair again, having nothing to enforce any more (a rate or a delay removed), where
// that re-plug would take away what the nodes' software made: going back to one pair is never
// needed, so the link keeps its ports rather than the change being refused. It says so to log.
func keepPorts(rec *state.Record, n *spec.Network, old, p *plan.Plan, running map[string]kinds.Instance, log *slog.Logger) error {
	if old == nil {
		return nil
	}
	auto := map[string]bool{}
	for _, sl := range n.Links {
		auto[sl.Name] = sl.DefaultConnector
	}
	for _, l := range p.Links {
		ol := old.Link(l.Name)
		if ol == nil || !auto[l.Name] || Wired(ol) || !Wired(l) || ol.Connector != spec.DefaultP2PConnector {
			continue
		}
		var what []string
		for _, port := range ol.Ports {
			soft, err := portSoft(rec, p, port, running)
			if err != nil {
				return fmt.Errorf("link %s: %w", l.Name, err)
			}
			what = append(what, soft...)
		}
		if len(what) > 0 {
			l.Connector = ol.Connector
			logline.OrDiscard(log).Warn(fmt.Sprintf("link %s keeps its ports: one veth pair again would take away %s", l.Name, strings.Join(what, " and ")), "link", l.Name)
		}
	}
	return nil
}
