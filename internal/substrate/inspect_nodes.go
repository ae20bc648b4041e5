package substrate

import (
	"context"
	"runtime"
	"sync"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/vishvananda/netlink"
)

// ifaceSeen is what a link's endpoint shows of its interface as the node sees it.
type ifaceSeen struct {
	MTU   int
	Stats *rtnl.Stats // nil if the kernel gave none
}

// nodeRead is what inspect read of one node.
type nodeRead struct {
	info NodeInfo
	seen map[string]ifaceSeen // its interfaces by name
}

// readNodes reads the nodes of plan p that run (found), a few at a time. It returns the nodes
// in the plan's order and their interfaces by "node:interface".
func readNodes(ctx context.Context, env *kinds.Env, p *plan.Plan, found map[string]kinds.Instance) ([]NodeInfo, map[string]ifaceSeen) {
	reads := make([]nodeRead, len(p.Nodes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(2*runtime.GOMAXPROCS(0), len(p.Nodes)) {
		wg.Go(func() {
			for i := range work {
				reads[i] = readNode(ctx, env, p.Nodes[i], found)
			}
		})
	}
	for i := range p.Nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	nodes := make([]NodeInfo, len(reads))
	seen := map[string]ifaceSeen{}
	for i, r := range reads {
		nodes[i] = r.info
		for ifname, s := range r.seen {
			seen[r.info.Name+":"+ifname] = s
		}
	}
	return nodes, seen
}

// readNode reads one node: its interfaces (for a Describer kind, what it describes) and what
// it uses.
func readNode(ctx context.Context, env *kinds.Env, n *plan.Node, found map[string]kinds.Instance) nodeRead {
	in, ok := found[n.Name]
	r := nodeRead{info: NodeInfo{Name: n.Name, Kind: n.Kind, PID: in.PID, Running: ok && in.PID != 0}, seen: map[string]ifaceSeen{}}
	if !r.info.Running {
		r.info.PID = 0
		return r
	}
	if k, _ := kinds.NodeKind(n.Kind); k != nil {
		if d, ok := k.(kinds.Describer); ok {
			describe(ctx, env, d, in, &r)
		} else {
			r.info.Interfaces = interfaces(in.PID, r.seen)
		}
	}
	r.info.Usage = usage(env, in)
	return r
}

// describe fills in a Describer node's interfaces, threads and notes.
func describe(ctx context.Context, env *kinds.Env, d kinds.Describer, in kinds.Instance, r *nodeRead) {
	detail, err := d.Describe(ctx, env, in)
	r.info.Threads, r.info.Notes = detail.Threads, detail.Notes
	if err != nil {
		r.info.Notes = append(r.info.Notes, err.Error())
	}
	for _, ifc := range detail.Interfaces {
		r.info.Interfaces = append(r.info.Interfaces, InterfaceInfo{Name: ifc.Name, MAC: ifc.HardwareAddr.String(), MTU: ifc.MTU,
			State: ifc.OperState.String(), Addresses: ifc.Addresses})
		r.seen[ifc.Name] = seenOf(&ifc.LinkAttrs)
	}
}

// interfaces lists the interfaces of the namespace of process pid, keeping what links show of
// them in seen, through a socket opened in that namespace (rtnl.DialPid says why not by the
// namespace's id from the machine's). A node that ended meanwhile has none.
func interfaces(pid int, seen map[string]ifaceSeen) []InterfaceInfo {
	conn, err := rtnl.DialPid(pid)
	if err != nil {
		return nil
	}
	defer conn.Close()
	links, err := conn.Links(rtnl.Own)
	if err != nil {
		return nil
	}
	addrs, err := conn.Addrs(rtnl.Own)
	if err != nil {
		return nil
	}
	byIndex := map[int][]string{}
	for _, a := range addrs {
		byIndex[a.Index] = append(byIndex[a.Index], a.Prefix.String())
	}
	out := make([]InterfaceInfo, 0, len(links))
	for _, l := range links {
		out = append(out, InterfaceInfo{Name: l.Name, MAC: l.MAC.String(), MTU: l.MTU,
			State: netlink.LinkOperState(l.OperState).String(), Addresses: byIndex[l.Index]})
		seen[l.Name] = ifaceSeen{MTU: l.MTU, Stats: &l.Stats}
	}
	return out
}

// seenOf is what links show of an interface that netlink decoded.
func seenOf(a *netlink.LinkAttrs) ifaceSeen {
	s := ifaceSeen{MTU: a.MTU}
	if st := a.Statistics; st != nil {
		s.Stats = &rtnl.Stats{RxPackets: st.RxPackets, TxPackets: st.TxPackets, RxBytes: st.RxBytes, TxBytes: st.TxBytes,
			RxDropped: st.RxDropped, TxDropped: st.TxDropped}
	}
	return s
}
