package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// profileSection writes the "where the time goes" section: the forwarding CPU's time per frame
// by what the code does, for each profiled setup, the differences that matter, and each setup's
// top symbols.
func profileSection(b *strings.Builder, rep *result.Report, _ string) {
	if len(rep.Profiles) == 0 {
		return
	}
	b.WriteString("## Where the time goes\n\n")
	b.WriteString("`perf record -a -g`" + ` while the generator offers each setup its zero-loss rate; the forwarding CPU's
samples (idle left out) by kernel symbol, grouped by what the code does, in nanoseconds per frame
delivered (samples / sampling frequency / frames). One profile per setup, of one trial: rougher
than the CPU cost above, but it says where the cost is. Tunnel setups are profiled as they are
measured for the peak: the whole path on the forwarding CPU, both machines' ends of the tunnels.

`)
	var groups []string
	seen := map[string]bool{}
	cell := map[string]map[string]result.ProfileRow{}
	for _, p := range rep.Profiles {
		cell[p.Setup] = map[string]result.ProfileRow{}
		for _, g := range p.Groups {
			cell[p.Setup][g.Name] = g
			if !seen[g.Name] {
				seen[g.Name] = true
				groups = append(groups, g.Name)
			}
		}
	}
	sort.SliceStable(groups, func(i, j int) bool { return maxNS(rep, groups[i]) > maxNS(rep, groups[j]) })
	b.WriteString("| ns per frame |")
	for _, p := range rep.Profiles {
		fmt.Fprintf(b, " %s |", p.Setup)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(rep.Profiles)) + "\n")
	for _, g := range groups {
		fmt.Fprintf(b, "| %s |", g)
		for _, p := range rep.Profiles {
			if c, ok := cell[p.Setup][g]; ok {
				fmt.Fprintf(b, " %s |", result.FormatF(c.NSPerFrame, 0))
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| **total** |")
	for _, p := range rep.Profiles {
		sum := 0.0
		for _, g := range p.Groups {
			sum += g.NSPerFrame
		}
		fmt.Fprintf(b, " **%s** |", result.FormatF(sum, 0))
	}
	b.WriteString("\n| offered (kpps) |")
	for _, p := range rep.Profiles {
		fmt.Fprintf(b, " %s |", result.FormatF(p.RatePPS/1e3, 0))
	}
	b.WriteString("\n\n")
	var diffs []string
	for _, pair := range [][2]string{{"shortbridge", "native"}, {"bridge", "shortbridge"}, {"lan", "shortbridge"}, {"egre-shortbridge", "shortbridge"}, {"egre-bridge", "bridge"}, {"vxlan", "egre-shortbridge"}} {
		if d := profileDiff(rep, pair[0], pair[1]); d != "" {
			diffs = append(diffs, d)
		}
	}
	if len(diffs) > 0 {
		b.WriteString("Differences, from these profiles:\n\n")
		for _, d := range diffs {
			fmt.Fprintf(b, "- %s\n", d)
		}
		b.WriteString("\n")
	}
	b.WriteString(whereTimeGoes)
	b.WriteString("Top symbols of each setup (share of the forwarding CPU's busy samples):\n\n")
	for _, p := range rep.Profiles {
		var syms []string
		for _, s := range p.Symbols[:min(10, len(p.Symbols))] {
			syms = append(syms, fmt.Sprintf("`%s` %s%%", s.Name, result.FormatF(s.Percent, 1)))
		}
		fmt.Fprintf(b, "- **%s**: %s\n", p.Setup, strings.Join(syms, ", "))
	}
	b.WriteString("\n")
}

// whereTimeGoes explains the profiles: what each path does per frame, from the code.
const whereTimeGoes = `What the paths do per frame, and so where the gaps come from:

- *native*: the node's veth receives the frame (one backlog round on the forwarding CPU), IP
  forwards it (route lookup, TTL, neighbour) and transmits it on its other veth, whose peer, the
  sink, receives it in a second backlog round.
- *shortbridge*: as native, plus the connectors' tc programs on the two ports in the substrate.
  On the way in, the frame arrives at the port (a backlog round, where RPS steers it), and
  bpf_redirect_peer hands it straight to the node's interface in the same round; on the way
  out, the node's interface transmits to its port, whose program redirects it into the sink.
  The extra cost is the ports' receive (tc, the program, the redirect), not an extra queue.
- *bridge*: each link is a Linux bridge between two veths. Every frame is received by a port,
  goes through the bridge (forwarding database lookup, br_handle_frame, br_forward) and is
  transmitted on the other port, whose veth peer receives it in a further backlog round; and
  every bridged frame goes through bridge netfilter (br_nf_*: this kernel has
  CONFIG_BRIDGE_NETFILTER and bridge-nf-call-iptables is 1 by default in every namespace), which
  attaches an skb extension and runs the IPv4 hooks as if routing. Two bridged hops per frame.
- *lan*: as shortbridge, but the ports' program is the LAN connector's: per frame it looks the
  source address up in the LAN's forwarding table (an LRU hash; written only when an address is
  new, moved, or its entry is more than a second old) and the destination, then hands the frame
  on with bpf_redirect_peer as the shortbridge does; broadcast and unknown destinations are
  cloned to every other member. No bridge device, no bridge netfilter.
- *egre-shortbridge*: the port's own tc program encapsulates each frame (bpf_skb_adjust_room,
  the outer MACs from the tunnel's template, redirect to the underlay; egre-shortbridge-fib
  makes a FIB lookup per frame instead); it crosses the underlay veth to the other machine (a
  backlog round there, as a NIC's receive would be) and is decapsulated (a map lookup, strip)
  straight into the node with bpf_redirect_peer. Along the whole path, on one CPU: four backlog
  rounds (the source's port, machine B's underlay, the node's outgoing port, machine A's
  underlay) against native's two, and two encapsulations and two decapsulations.
- *egre-bridge*: as egre-shortbridge, but each frame also crosses a bridge and a tunnel port (a
  veth pair: one more backlog round) on each side of each tunnel.
- *vxlan*: the kernel's VXLAN device builds a UDP packet per frame (route lookup, UDP and IP
  output) and receives it through the UDP stack and GRO cells.

`

// maxNS is the highest nanoseconds per frame of a profile group over the profiled setups.
func maxNS(rep *result.Report, group string) float64 {
	m := 0.0
	for _, p := range rep.Profiles {
		for _, g := range p.Groups {
			if g.Name == group {
				m = max(m, g.NSPerFrame)
			}
		}
	}
	return m
}

// profileDiff says what setup a costs per frame more than setup b, and in which groups.
func profileDiff(rep *result.Report, a, b string) string {
	var pa, pb *result.ProfileResult
	for _, p := range rep.Profiles {
		switch p.Setup {
		case a:
			pa = p
		case b:
			pb = p
		}
	}
	if pa == nil || pb == nil {
		return ""
	}
	ns := func(p *result.ProfileResult) map[string]float64 {
		m := map[string]float64{}
		for _, g := range p.Groups {
			m[g.Name] = g.NSPerFrame
		}
		return m
	}
	ma, mb := ns(pa), ns(pb)
	total := 0.0
	type d struct {
		name string
		v    float64
	}
	var ds []d
	for name, v := range ma {
		ds = append(ds, d{name, v - mb[name]})
		total += v
	}
	for name, v := range mb {
		if _, ok := ma[name]; !ok {
			ds = append(ds, d{name, -v})
		}
		total -= v
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].v > ds[j].v })
	var parts []string
	for _, x := range ds[:min(3, len(ds))] {
		if x.v > 0 {
			parts = append(parts, fmt.Sprintf("%s +%s", x.name, result.FormatF(x.v, 0)))
		}
	}
	return fmt.Sprintf("**%s** costs %s ns per frame %s than **%s**; most of the difference: %s.", a, result.FormatF(math.Abs(total), 0), map[bool]string{true: "more", false: "less"}[total >= 0], b, strings.Join(parts, ", "))
}
