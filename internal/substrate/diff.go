package substrate

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// Change is one difference between what runs and the plan, as `trellis diff` shows it.
type Change struct {
	Op     string   `json:"op"`     // "add", "remove", "change", "restart" (a node), or "refuse" (up would refuse)
	Object string   `json:"object"` // "node" or "link"
	Name   string   `json:"name"`
	What   []string `json:"what,omitempty"` // for change and restart: what differs, and why
}

func (c Change) String() string {
	sign := map[string]string{"add": "+", "remove": "-", "change": "~", "restart": "!", "refuse": "x"}[c.Op]
	s := fmt.Sprintf("%s %s %s", sign, c.Object, c.Name)
	if c.Op == "restart" {
		s += " (restarts)"
	}
	if len(c.What) > 0 {
		s += ": " + strings.Join(c.What, "; ")
	}
	return s
}

// Diff lists what converging from plan old (nil: nothing) to plan p changes. running holds
// the digests of the nodes that run now (nil: take old's nodes as running); a node that should
// run and does not is started again. Diff needs no kernel.
func Diff(old, p *plan.Plan, running map[string]string) []Change {
	if old == nil {
		old = &plan.Plan{}
	}
	if running == nil {
		running = map[string]string{}
		for _, n := range old.Nodes {
			running[n.Name] = n.Digest
		}
	}
	out := diffNodes(old, p, running)
	return append(out, diffLinks(old, p)...)
}

func diffNodes(old, p *plan.Plan, running map[string]string) []Change {
	var out []Change
	for _, n := range p.Nodes {
		digest, ok := running[n.Name]
		on := old.Node(n.Name)
		switch {
		case !ok && on == nil:
			out = append(out, Change{Op: "add", Object: "node", Name: n.Name})
		case !ok:
			out = append(out, Change{Op: "restart", Object: "node", Name: n.Name, What: []string{"it is not running"}})
		case digest == kinds.PartGone:
			out = append(out, Change{Op: "restart", Object: "node", Name: n.Name, What: []string{"part of it is not running (its VM or an engine VM)"}})
		case digest != n.Digest:
			what := []string{"its settings changed"}
			if on != nil && on.Digest == digest {
				what = nodeChanges(on.Node, n.Node)
			}
			out = append(out, Change{Op: "restart", Object: "node", Name: n.Name, What: what})
		}
	}
	var gone []string
	for name := range running {
		if p.Node(name) == nil {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		out = append(out, Change{Op: "remove", Object: "node", Name: name})
	}
	return out
}

// nodeChanges names the settings that differ between two versions of a node.
func nodeChanges(a, b *spec.Node) []string {
	var out []string
	fields := []struct {
		name string
		x, y any
	}{{"kind", a.Kind, b.Kind}, {"loopback addresses", a.Addresses["lo"], b.Addresses["lo"]}, {"sysctl", a.Sysctl, b.Sysctl},
		{"files", a.Files, b.Files}, {"exec", a.Exec, b.Exec}, {"rootfs", a.Rootfs, b.Rootfs},
		{"dataplane", a.Dataplane != nil, b.Dataplane != nil}}
	for _, f := range fields {
		if !reflect.DeepEqual(f.x, f.y) {
			out = append(out, f.name+" changed")
		}
	}
	if len(out) == 0 {
		out = []string{"its settings changed"}
	}
	return out
}

func diffLinks(old, p *plan.Plan) []Change {
	var out []Change
	for _, l := range p.Links {
		ol := old.Link(l.Name)
		if ol == nil {
			out = append(out, Change{Op: "add", Object: "link", Name: l.Name})
			continue
		}
		if what := linkChanges(ol, l, !old.SameTunnel(p), anewOnMTU(p, l)); len(what) > 0 {
			out = append(out, Change{Op: "change", Object: "link", Name: l.Name, What: what})
		}
	}
	for _, ol := range old.Links {
		if p.Link(ol.Name) == nil {
			out = append(out, Change{Op: "remove", Object: "link", Name: ol.Name})
		}
	}
	return out
}

// Recreated is what diff says of the interfaces a link's MTU change makes anew: those of nodes
// whose kind cannot change an interface's MTU in place (not a kinds.MTUSetter: a VM's NIC).
// It is the only change that touches what the nodes' software set on an interface.
const Recreated = "made anew: addresses and routes their nodes' software set on them go"

// Replugged is what diff says of the interfaces of a link that gets or loses its ports (a
// direct link, kinds.Wire, joined by a connector in the substrate, or the reverse).
const Replugged = "re-plugged: made anew, so their nodes see the carrier drop and come back, with a new ifindex; addresses and routes their nodes' software set on them go"

// NoTCX is what diff adds to a re-plug that only a kernel without tcx needs: a direct link
// taken down or impaired (loss, duplication, corruption) on Linux before 6.6.
const NoTCX = "this kernel has no tcx (Linux 6.6 or later), which takes a direct link down and impairs it without ports"

// KeepPorts is what diff and a live change add to a re-plug: why the link had none (or gets
// none), and how to keep a link from being re-plugged.
const KeepPorts = "a point-to-point link that names no connector is one veth pair while it has nothing to enforce; `connector: shortbridge` in the file keeps its ports, never re-plugged"

// replugText says, in parentheses, which interfaces a change of connector between a and b
// re-plugs, if it does: from a direct link to ports or back.
func replugText(a, b *plan.Link) string {
	if r := replugged(a, b); r != "" {
		return " (" + r + ")"
	}
	return ""
}

// replugged says which interfaces a change of connector between a and b re-plugs, what their
// nodes see and how to avoid it; "" if it re-plugs none.
func replugged(a, b *plan.Link) string {
	if Wired(a) == Wired(b) {
		return ""
	}
	var eps []string
	for _, p := range b.Ports {
		eps = append(eps, p.String())
	}
	how := "to ports"
	if Wired(b) {
		how = "to one veth pair"
	} else if !plan.WireEnforces() && !b.NeedsPortsAlways() {
		how += " (" + NoTCX + ")"
	}
	return fmt.Sprintf("%s %s %s; %s", strings.Join(eps, ", "), how, Replugged, KeepPorts)
}

// anewOnMTU lists the endpoints of link l whose interfaces a change of its MTU makes anew.
func anewOnMTU(p *plan.Plan, l *plan.Link) []string {
	var out []string
	for _, port := range l.Ports {
		n := p.Node(port.Node)
		if n == nil {
			continue
		}
		if k, err := kinds.NodeKind(n.Kind); err == nil {
			if _, ok := k.(kinds.MTUSetter); ok {
				continue
			}
		}
		out = append(out, port.String())
	}
	return out
}

// linkChanges names what differs between two versions of a link; anew are the endpoints whose
// interfaces an MTU change makes anew (anewOnMTU).
func linkChanges(a, b *plan.Link, tunnelKind bool, anew []string) []string {
	var out []string
	add := func(what string, x, y any) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %v -> %v", what, x, y))
		}
	}
	if a.Connector != b.Connector {
		out = append(out, fmt.Sprintf("connector %s -> %s%s", a.Connector, b.Connector, replugText(a, b)))
	}
	add("rate", rateText(a.Rate), rateText(b.Rate))
	if a.MTU != b.MTU {
		mtu := fmt.Sprintf("mtu %s -> %s", mtuText(a.MTU), mtuText(b.MTU))
		if len(anew) > 0 {
			mtu += fmt.Sprintf(" (%s %s)", strings.Join(anew, ", "), Recreated)
		}
		out = append(out, mtu)
	}
	add("state", stateWord(a.Down), stateWord(b.Down))
	out = append(out, spec.SettingsChanges(a.KindSettings(), b.KindSettings())...)
	ap, bp := portsByEndpoint(a), portsByEndpoint(b)
	for _, ep := range slices.Sorted(maps.Keys(bp)) {
		x, ok := ap[ep]
		if !ok {
			out = append(out, "member "+ep+" added")
			continue
		}
		y := bp[ep]
		if x.Impair != y.Impair {
			out = append(out, fmt.Sprintf("impairment from %s %s -> %s", ep, impairText(x.Impair), impairText(y.Impair)))
		}
		if !reflect.DeepEqual(x.Addresses, y.Addresses) {
			out = append(out, fmt.Sprintf("addresses of %s %v -> %v", ep, x.Addresses, y.Addresses))
		}
		if x.Down != y.Down {
			out = append(out, fmt.Sprintf("endpoint %s %s -> %s", ep, stateWord(x.Down), stateWord(y.Down)))
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(ap)) {
		if _, ok := bp[ep]; !ok {
			out = append(out, "member "+ep+" removed")
		}
	}
	if tunnelKind || !reflect.DeepEqual(a.Tunnels, b.Tunnels) {
		out = append(out, "tunnels changed")
	}
	return out
}

func portsByEndpoint(l *plan.Link) map[string]plan.Port {
	out := map[string]plan.Port{}
	for _, p := range l.Ports {
		out[p.String()] = p
	}
	return out
}

func stateWord(down bool) string {
	if down {
		return "down"
	}
	return "up"
}

// impairText writes an impairment as the topology file does.
func impairText(im spec.Impairment) string {
	if im.IsZero() {
		return "none"
	}
	var parts []string
	pct := func(name string, v float64) {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s %g%%", name, v))
		}
	}
	pct("loss", im.Loss)
	pct("correlation", im.LossCorrelation)
	pct("duplicate", im.Duplicate)
	pct("corrupt", im.Corrupt)
	if im.Delay != 0 {
		parts = append(parts, "delay "+im.Delay.String())
	}
	if im.Jitter != 0 {
		parts = append(parts, "jitter "+im.Jitter.String()+" "+im.Distribution)
	}
	return strings.Join(parts, ", ")
}

func mtuText(mtu int) string {
	if mtu == 0 {
		return "default"
	}
	return fmt.Sprint(mtu)
}

func rateText(bps uint64) string {
	if bps == 0 {
		return "none"
	}
	return spec.FormatRate(bps)
}

// settingsOnly tells whether changes only change links' settings in place: rate,
// impairments, state or a LAN's table settings (not addresses: see change).
func settingsOnly(changes []Change) bool {
	for _, c := range changes {
		if c.Op != "change" || c.Object != "link" {
			return false
		}
		for _, w := range c.What {
			if !strings.HasPrefix(w, "rate ") && !strings.HasPrefix(w, "impairment ") && !strings.HasPrefix(w, "state ") &&
				!strings.HasPrefix(w, "endpoint ") && !strings.HasPrefix(w, "table ") && !strings.HasPrefix(w, "ageing ") {
				return false
			}
		}
	}
	return true
}
