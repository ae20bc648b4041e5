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

// readNodes reads the nodes of plan p that run (found), a few at a time, through rd's cache
// if rd is not nil (nsids are the nodes' namespace ids, from their ports). It returns the
// nodes in the plan's order and their interfaces by "node:interface".
func readNodes(ctx context.Context, env *kinds.Env, p *plan.Plan, found map[string]kinds.Instance, rd *Reader, nsids map[string]int) ([]NodeInfo, map[string]ifaceSeen) {
	reads := make([]nodeRead, len(p.Nodes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(2*runtime.GOMAXPROCS(0), len(p.Nodes)) {
		wg.Go(func() {
			var cr *cachedRead
			if rd != nil {
				if conn, err := rtnl.Dial(); err == nil {
					defer conn.Close()
					cr = &cachedRead{rd: rd, conn: conn, nsids: nsids}
				}
			}
			for i := range work {
				reads[i] = readNode(ctx, env, p.Nodes[i], found, cr)
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

// cachedRead is what a reader goroutine needs to read nodes through a Reader's cache.
type cachedRead struct {
	rd    *Reader
	conn  *rtnl.Conn
	nsids map[string]int
}

// readNode reads one node: its interfaces (for a Describer kind, what it describes; through
// cr's cache if cr is not nil and knows the node's namespace id) and what it uses.
func readNode(ctx context.Context, env *kinds.Env, n *plan.Node, found map[string]kinds.Instance, cr *cachedRead) nodeRead {
	in, ok := found[n.Name]
	r := nodeRead{info: NodeInfo{Name: n.Name, Kind: n.Kind, PID: in.PID, Running: ok && in.PID != 0}, seen: map[string]ifaceSeen{}}
	if !r.info.Running {
		r.info.PID = 0
		return r
	}
	if k, _ := kinds.NodeKind(n.Kind); k != nil {
		if d, ok := k.(kinds.Describer); ok {
			describe(ctx, env, d, in, &r)
		} else if nsid, ok := cr.nsid(n.Name); ok {
			var err error
			if r.info.Interfaces, err = cr.rd.cachedInterfaces(cr.conn, in.PID, nsid, r.seen); err != nil {
				r.info.Interfaces = interfaces(in.PID, r.seen)
			}
		} else {
			r.info.Interfaces = interfaces(in.PID, r.seen)
		}
	}
	r.info.Usage = usage(env, in)
	return r
}

// nsid returns the namespace id of node name, if cr is not nil and knows it.
func (cr *cachedRead) nsid(name string) (int, bool) {
	if cr == nil {
		return 0, false
	}
	id, ok := cr.nsids[name]
	return id, ok
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
	s := ifaceSeen{MTU: a.MTU}
	if st := a.Statistics; st != nil {
		s.Stats = &rtnl.Stats{RxPackets: st.RxPackets, TxPackets: st.TxPackets, RxBytes: st.RxBytes, TxBytes: st.TxBytes,
			RxDropped: st.RxDropped, TxDropped: st.TxDropped}
	}
	return s
}
