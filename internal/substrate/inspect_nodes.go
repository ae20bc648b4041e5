package substrate

import (
	"context"
	"runtime"
	"sync"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ifaceSeen is what a link's endpoint shows of its interface as the node sees it.
type ifaceSeen struct {
	MTU   int
	Up    bool        // it is up with a carrier (hasCarrier)
	Stats *rtnl.Stats // nil if the kernel gave none
}

// nodeRead is what inspect read of one node.
type nodeRead struct {
	info NodeInfo
	seen map[string]ifaceSeen // its interfaces by name
}

// readNodes reads the nodes of plan p that run (found), a few at a time, in two rounds: what
// needs no namespace id (each node's use of its cgroup, and with rd its devices' counters)
// while the root namespace's devices are read, then, once nsids (the nodes' namespace ids,
// from their ports) returns, their interfaces: through rd's cache if rd is not nil. It
// returns the nodes in the plan's order and their interfaces by "node:interface".
func readNodes(ctx context.Context, env *kinds.Env, p *plan.Plan, found map[string]kinds.Instance, rd *Reader, nsids func() map[string]int) ([]NodeInfo, map[string]ifaceSeen) {
	reads := make([]nodeRead, len(p.Nodes))
	counters := make([]map[string]rtnl.Stats, len(p.Nodes))
	forEach(len(p.Nodes), func(i int) {
		n := p.Nodes[i]
		in, ok := found[n.Name]
		reads[i] = nodeRead{info: NodeInfo{Name: n.Name, Kind: n.Kind, PID: in.PID, Running: ok && in.PID != 0}, seen: map[string]ifaceSeen{}}
		if !reads[i].info.Running {
			reads[i].info.PID = 0
			return
		}
		reads[i].info.Usage = usage(env, in)
		if rd != nil && !describes(n.Kind) {
			counters[i], _ = DevCounters(in.PID) // none: read with the interfaces below
		}
	})
	ids := nsids()
	forEach(len(p.Nodes), func(i int) {
		if reads[i].info.Running {
			readInterfaces(ctx, env, p.Nodes[i], found[p.Nodes[i].Name], rd, ids, counters[i], &reads[i])
		}
	})
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

// forEach calls f for 0 to n-1, a few at a time.
func forEach(n int, f func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(2*runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := range work {
				f(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// describes tells whether nodes of kind describe their interfaces themselves (kinds.Describer).
func describes(kind string) bool {
	k, _ := kinds.NodeKind(kind)
	_, ok := k.(kinds.Describer)
	return ok
}

// readInterfaces reads the interfaces of running node n (instance in) into r: for a Describer
// kind, what it describes; else through rd's cache with counters (read before) if rd is not
// nil and ids has the node's namespace id, else from a socket in its namespace.
func readInterfaces(ctx context.Context, env *kinds.Env, n *plan.Node, in kinds.Instance, rd *Reader, ids map[string]int, counters map[string]rtnl.Stats, r *nodeRead) {
	k, _ := kinds.NodeKind(n.Kind)
	if k == nil {
		return
	}
	if d, ok := k.(kinds.Describer); ok {
		describe(ctx, env, d, in, r)
		return
	}
	if nsid, ok := ids[n.Name]; ok && rd != nil && counters != nil {
		if links, addrs, err := rd.cache.Read(nsid); err == nil {
			r.info.Interfaces = interfaceInfos(links, addrs, counters, r.seen)
			return
		}
	}
	r.info.Interfaces = interfaces(in.PID, r.seen)
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
	return interfaceInfos(links, addrs, nil, seen)
}

// seenOf is what links show of an interface that netlink decoded.
func seenOf(a *netlink.LinkAttrs) ifaceSeen {
	s := ifaceSeen{MTU: a.MTU, Up: hasCarrier(a.RawFlags, uint8(a.OperState))}
	if st := a.Statistics; st != nil {
		s.Stats = &rtnl.Stats{RxPackets: st.RxPackets, TxPackets: st.TxPackets, RxBytes: st.RxBytes, TxBytes: st.TxBytes,
			RxDropped: st.RxDropped, TxDropped: st.TxDropped}
	}
	return s
}

// hasCarrier tells from IFF_* flags whether an interface is up with a carrier. Unlike the
// operational state, which the kernel's link watch sets up to a second later, the flags say
// it at once. An end of a direct link taken down is up with a carrier but DORMANT (oper, its
// operational state: kinds/veth): it is down.
func hasCarrier(flags uint32, oper uint8) bool {
	return flags&unix.IFF_UP != 0 && flags&unix.IFF_LOWER_UP != 0 && netlink.LinkOperState(oper) != netlink.OperDormant
}
