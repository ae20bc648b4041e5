package metrics

import (
	"errors"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"golang.org/x/sys/unix"
)

// snapshot is what one scrape read: the metrics, and the machine-wide devices they came from.
type snapshot struct {
	out     samples
	devs    map[string]rtnl.Link  // root namespace devices by name
	shaper  map[int]uint64        // tbf drops by device index
	tunnels map[string]*plan.Plan // a plan of each tunnel kind seen, for machine-wide counters
}

// network is what a scrape read of one network.
type network struct {
	rec     *state.Record
	running map[string]kinds.Instance // its nodes that run
	// ifaces are the counters of the node-side interfaces of its ports, by the id of their
	// namespace and their name.
	ifaces map[int]map[string]rtnl.Stats
	// direct are the counters of the interfaces of nodes with direct links (no port, so no
	// peer to find their namespace by), by node and interface name.
	direct map[string]map[string]rtnl.Stats
	usage  map[string]kinds.Usage // what its running nodes use, for kinds that tell it
	ports  *portNS                // its port namespace's devices, if it has one (portns.go)
}

// read reads every network: the records, one dump of the root namespace's devices and (if a
// link has a rate cap) one of its qdiscs for all ports, and for each running node a dump of its devices (by namespace id,
// from the root namespace) for its interfaces' counters and its cgroup's counters. The root dumps run while the
// records and the running nodes are read.
func (c *Collector) read() (*snapshot, error) {
	s := &snapshot{out: samples{}, shaper: map[int]uint64{}, tunnels: map[string]*plan.Plan{}}
	var devErr error
	var wg sync.WaitGroup
	wg.Go(func() { devErr = s.readRoot() })
	recs, err := c.st.List()
	if slices.ContainsFunc(recs, func(r *state.Record) bool { return shaped(r.Plan) }) {
		wg.Go(s.readShapers)
	}
	nets := make([]*network, len(recs))
	for i, rec := range recs {
		nets[i] = &network{rec: rec}
		nets[i].ports = readPortNS(nets[i])
		if running, rerr := substrate.Running(c.st, rec.Plan); rerr == nil {
			nets[i].running = running
		}
	}
	wg.Wait()
	if err := errors.Join(err, devErr); err != nil {
		return nil, err
	}
	c.readNodes(nets, s.devs)
	for _, n := range nets {
		c.readNetwork(s, n)
	}
	c.readTunnelKinds(s)
	return s, nil
}

// shaped tells whether a link of plan p has a rate cap (a shaper on its ports).
func shaped(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Links, func(l *plan.Link) bool { return l.Rate > 0 })
}

// readShapers reads the drops of the root namespace's tbf qdiscs (the shapers); none if they
// cannot be read: counters are for show.
func (s *snapshot) readShapers() {
	conn, err := rtnl.Dial()
	if err != nil {
		return
	}
	defer conn.Close()
	if drops, err := conn.QdiscDrops("tbf"); err == nil {
		s.shaper = drops
	}
}

// readRoot reads the root namespace's devices.
func (s *snapshot) readRoot() error {
	conn, err := rtnl.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	s.devs, err = linksByName(conn)
	return err
}

// linksByName lists the devices of conn's namespace, by name.
func linksByName(conn *rtnl.Conn) (map[string]rtnl.Link, error) {
	links, err := conn.Links(rtnl.Own)
	if err != nil {
		return nil, err
	}
	out := make(map[string]rtnl.Link, len(links))
	for _, l := range links {
		out[l.Name] = l
	}
	return out, nil
}

// readNodes reads, for every node that runs, what it uses (its kind's Measurer) and the
// counters of its ports' node-side interfaces (the namespace of each port's peer), a few
// nodes at a time, each reader with a route netlink socket of its own.
func (c *Collector) readNodes(nets []*network, devs map[string]rtnl.Link) {
	type job struct {
		n      *network
		in     kinds.Instance
		nsids  []int
		direct bool // the node has direct links: read its namespace's /proc/PID/net/dev
	}
	var jobs []*job
	for _, n := range nets {
		n.ifaces, n.usage, n.direct = map[int]map[string]rtnl.Stats{}, map[string]kinds.Usage{}, map[string]map[string]rtnl.Stats{}
		byNode := map[string]*job{}
		for _, node := range n.rec.Plan.Nodes {
			if in, ok := n.running[node.Name]; ok {
				byNode[node.Name] = &job{n: n, in: in}
				jobs = append(jobs, byNode[node.Name])
			}
		}
		for _, l := range n.rec.Plan.Links {
			for _, p := range l.Ports {
				d, ok := devs[p.Name]
				j := byNode[p.Node]
				if j != nil && (substrate.Wired(l) || n.ports != nil) {
					j.direct = true
					continue
				}
				if ok && j != nil && d.PeerNetNsID >= 0 && !slices.Contains(j.nsids, d.PeerNetNsID) {
					j.nsids = append(j.nsids, d.PeerNetNsID)
				}
			}
		}
	}
	type result struct {
		usage  *kinds.Usage
		ifaces map[int]map[string]rtnl.Stats
		direct map[string]rtnl.Stats
	}
	got := make([]result, len(jobs))
	parallel(len(jobs), func(conn *rtnl.Conn, i int) {
		j := jobs[i]
		got[i].usage = c.usage(j.n.rec.Plan, j.in)
		got[i].ifaces = map[int]map[string]rtnl.Stats{}
		if j.direct {
			got[i].direct, _ = substrate.DevCounters(j.in.PID) // a node that ended has none
		}
		for _, nsid := range j.nsids {
			if links, err := conn.Links(nsid); err == nil { // a node that ended has none
				got[i].ifaces[nsid] = make(map[string]rtnl.Stats, len(links))
				for _, l := range links {
					got[i].ifaces[nsid][l.Name] = l.Stats
				}
			}
		}
	})
	for i, j := range jobs {
		if got[i].usage != nil {
			j.n.usage[j.in.Name] = *got[i].usage
		}
		maps.Copy(j.n.ifaces, got[i].ifaces)
		if got[i].direct != nil {
			j.n.direct[j.in.Name] = got[i].direct
		}
	}
}

// usage asks the kind of node in what it uses; nil if the kind cannot tell, or the node ended.
func (c *Collector) usage(p *plan.Plan, in kinds.Instance) *kinds.Usage {
	k, err := kinds.NodeKind(in.Kind)
	m, ok := k.(kinds.Measurer)
	if err != nil || !ok {
		return nil
	}
	u, err := m.Usage(&kinds.Env{Store: c.st, Plan: p}, in)
	if err != nil {
		return nil
	}
	return &u
}

// parallel runs f(conn, 0..n-1) on a few goroutines, each with a route netlink socket of its
// own (nil if it could not open one: then f's netlink reads are skipped by the caller).
func parallel(n int, f func(conn *rtnl.Conn, i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(2*runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			conn, err := rtnl.Dial()
			if err != nil {
				for range work {
				}
				return
			}
			defer conn.Close()
			for i := range work {
				f(conn, i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

func (c *Collector) machineOf(p *plan.Plan) string {
	if p.Host != "" {
		return p.Host
	}
	return c.machine
}

// readNetwork adds the metrics of one network.
func (c *Collector) readNetwork(s *snapshot, n *network) {
	rec, p := n.rec, n.rec.Plan
	machine := c.machineOf(p)
	s.out.add(famNetwork, 1, rec.Name, rec.Status, machine)
	if p.Tunnel != "" && s.tunnels[p.Tunnel] == nil {
		s.tunnels[p.Tunnel] = p
	}
	for _, node := range p.Nodes {
		_, runs := n.running[node.Name]
		s.out.add(famNodeUp, boolValue(runs), rec.Name, node.Name, machine)
		if u, ok := n.usage[node.Name]; ok {
			s.out.addFloat(famCPU, u.CPUSeconds, rec.Name, node.Name, machine)
			s.out.add(famMemory, u.Memory, rec.Name, node.Name, machine)
			s.out.add(famProcesses, uint64(max(u.Processes, 0)), rec.Name, node.Name, machine)
			s.out.add(famOOMKills, uint64(max(u.OOMKills, 0)), rec.Name, node.Name, machine)
		}
	}
	for _, l := range p.Links {
		s.out.add(famLinkUp, boolValue(!l.Down), rec.Name, l.Name, machine)
		for _, port := range l.Ports {
			c.readPort(s, n, machine, l, port)
		}
		for _, t := range l.Tunnels {
			if d, ok := s.devs[t.Device]; ok {
				lv := []string{rec.Name, l.Name, t.Host, machine}
				s.out.add(famTunRxFrames, d.Stats.RxPackets, lv...)
				s.out.add(famTunTxFrames, d.Stats.TxPackets, lv...)
				s.out.add(famTunRxBytes, d.Stats.RxBytes, lv...)
				s.out.add(famTunTxBytes, d.Stats.TxBytes, lv...)
			}
		}
	}
}

// readPort adds the metrics of one port; its interface's counters are those of the node's
// side (zero if the node does not run).
func (c *Collector) readPort(s *snapshot, n *network, machine string, l *plan.Link, port plan.Port) {
	lv := []string{n.rec.Name, port.Node, l.Name, port.Ifname, machine}
	if n.ports != nil {
		c.readPortIn(s, n, lv, port)
		return
	}
	if substrate.Wired(l) { // no port: the counters of the node's interface, the veth's own
		st, ok := n.direct[port.Node][port.Ifname]
		s.out.add(famPortUp, boolValue(ok), lv...)
		if ok {
			s.addStats(st, lv)
		}
		c.readDirectImpair(s, n, l, port, lv)
		return
	}
	a, ok := s.devs[port.Name]
	if !ok {
		s.out.add(famPortUp, 0, lv...)
		return
	}
	st := n.ifaces[a.PeerNetNsID][port.Ifname]
	s.out.add(famPortUp, boolValue(a.Flags&unix.IFF_UP != 0), lv...)
	s.addStats(st, lv)
	s.out.add(famShaper, s.shaper[a.Index], lv...)
	if port.Impair.IsZero() {
		return
	}
	if ic, err := dataplane.ReadImpairCounters(a.Index); err == nil {
		s.addImpair(ic, lv)
	}
}

// readDirectImpair adds the impairment counters of what port's endpoint of direct link l
// sends, read where they are: on the other end, in its node's namespace.
func (c *Collector) readDirectImpair(s *snapshot, n *network, l *plan.Link, port plan.Port, lv []string) {
	i := slices.IndexFunc(l.Ports, func(p plan.Port) bool { return p.String() == port.String() })
	if port.Impair.IsZero() || i < 0 || len(l.Ports) != 2 {
		return
	}
	if other, ok := n.running[l.Ports[1-i].Node]; ok && other.PID != 0 {
		if ic, err := substrate.DirectImpairCounters(l, i, other.PID); err == nil {
			s.addImpair(ic, lv)
		}
	}
}

// readTunnelKinds adds the machine-wide counters of the tunnel kinds that offer them (the
// decapsulation program, which EGRE and VXLAN share), once per scrape and machine.
func (c *Collector) readTunnelKinds(s *snapshot) {
	seen := map[string]bool{}
	for name, p := range s.tunnels {
		tk, err := kinds.TunnelKind(name)
		if err != nil {
			continue
		}
		ck, ok := tk.(interface {
			Counters(*kinds.Env) *dataplane.EGRECounters
		})
		if !ok {
			continue
		}
		e := ck.Counters(&kinds.Env{Store: c.st, Plan: p}) // the plan names the machine's underlay
		if e == nil {
			continue
		}
		m := c.machineOf(p)
		if seen[m] {
			continue
		}
		seen[m] = true
		s.out.add(famDecap, e.Decapsulated, m)
		s.out.add(famUnkKey, e.UnknownKey, m)
		s.out.add(famWrong, e.WrongSource, m)
		s.out.add(famDecErr, e.Errors, m)
		s.out.add(famVXRef, e.VXLANRefused, m)
	}
}

func boolValue(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// addStats adds an interface's counters.
func (s *snapshot) addStats(st rtnl.Stats, lv []string) {
	s.out.add(famRxFrames, st.RxPackets, lv...)
	s.out.add(famTxFrames, st.TxPackets, lv...)
	s.out.add(famRxBytes, st.RxBytes, lv...)
	s.out.add(famTxBytes, st.TxBytes, lv...)
	s.out.add(famRxDrops, st.RxDropped, lv...)
	s.out.add(famTxDrops, st.TxDropped, lv...)
}

// addImpair adds an impairment's counters.
func (s *snapshot) addImpair(ic dataplane.ImpairCounters, lv []string) {
	s.out.add(famImpDrop, ic.Dropped, lv...)
	s.out.add(famImpDup, ic.Duplicated, lv...)
	s.out.add(famImpCorr, ic.Corrupted, lv...)
}
