package substrate

import (
	"context"
	"runtime"
	"sync"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
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

// readNodes reads the nodes of plan p that run (found), a few at a time, each reader with a
// route netlink socket of its own that reads the nodes' namespaces by their ids: nothing
// enters a namespace, unless a node's namespace has no id (then its interfaces are read the
// slow way, from inside). It returns the nodes in the plan's order and their interfaces by
// "node:interface". nsids are the namespace ids known from the nodes' ports; the others are
// asked for by process.
func readNodes(ctx context.Context, env *kinds.Env, p *plan.Plan, found map[string]kinds.Instance, nsids map[string]int) ([]NodeInfo, map[string]ifaceSeen) {
	reads := make([]nodeRead, len(p.Nodes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(2*runtime.GOMAXPROCS(0), len(p.Nodes)) {
		wg.Go(func() {
			conn, err := rtnl.Dial()
			if err == nil {
				defer conn.Close()
			}
			for i := range work {
				nsid, ok := nsids[p.Nodes[i].Name]
				if !ok {
					nsid = -1
				}
				reads[i] = readNode(ctx, env, p.Nodes[i], found, nsid, conn)
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
// it uses. nsid is its namespace's id, or -1 if not known. conn may be nil (no socket could be opened): then the interfaces are read from
// inside the node's namespace.
func readNode(ctx context.Context, env *kinds.Env, n *plan.Node, found map[string]kinds.Instance, nsid int, conn *rtnl.Conn) nodeRead {
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
			r.info.Interfaces = interfaces(conn, in.PID, nsid, r.seen)
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
// them in seen: through conn by the namespace's id (nsid, or asked for if -1), or from inside
// the namespace if it has none. A node that ended meanwhile has none.
func interfaces(conn *rtnl.Conn, pid, nsid int, seen map[string]ifaceSeen) []InterfaceInfo {
	if conn == nil {
		return interfacesInside(pid, seen)
	}
	if nsid < 0 {
		var err error
		if nsid, err = conn.NsID(pid); err != nil {
			return nil
		}
	}
	if nsid < 0 {
		return interfacesInside(pid, seen)
	}
	links, err := conn.Links(nsid)
	if err != nil {
		return nil
	}
	addrs, err := conn.Addrs(nsid)
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

// interfacesInside lists the interfaces of the namespace of process pid from inside it.
func interfacesInside(pid int, seen map[string]ifaceSeen) []InterfaceInfo {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil
	}
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil
	}
	defer nl.Close()
	links, err := nl.LinkList()
	if err != nil {
		return nil
	}
	var out []InterfaceInfo
	for _, l := range links {
		a := l.Attrs()
		ii := InterfaceInfo{Name: a.Name, MAC: a.HardwareAddr.String(), MTU: a.MTU, State: a.OperState.String()}
		if addrs, err := nl.AddrList(l, netlink.FAMILY_ALL); err == nil {
			for _, ad := range addrs {
				ii.Addresses = append(ii.Addresses, ad.IPNet.String())
			}
		}
		seen[a.Name] = seenOf(a)
		out = append(out, ii)
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
