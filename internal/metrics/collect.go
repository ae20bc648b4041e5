package metrics

import (
	"errors"
	"runtime"
	"sync"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// snapshot is what one scrape read: the metrics, and the machine-wide devices they came from.
type snapshot struct {
	out     samples
	devs    map[string]device     // root namespace devices by name
	shaper  map[int]uint64        // tbf drops by device index
	tunnels map[string]*plan.Plan // a plan of each tunnel kind seen, for machine-wide counters
}

// read reads every network: the records, one dump of the root namespace's devices and one of
// its qdiscs for all ports, and one file read per running node for its interfaces' counters.
// The dumps run while the records and the nodes' counters are read.
func (c *Collector) read() (*snapshot, error) {
	s := &snapshot{out: samples{}, shaper: map[int]uint64{}, tunnels: map[string]*plan.Plan{}}
	var devErr error
	var wg sync.WaitGroup
	wg.Go(func() { s.devs, devErr = listDevices() })
	wg.Go(func() {
		if qdiscs, err := netlink.QdiscList(nil); err == nil {
			for _, q := range qdiscs {
				if tbf, ok := q.(*netlink.Tbf); ok && tbf.Statistics != nil {
					s.shaper[tbf.LinkIndex] = uint64(tbf.Statistics.Queue.Drops)
				}
			}
		}
	})
	recs, err := c.st.List()
	stats := make([]map[string]map[string]ifStats, len(recs))
	for i, rec := range recs {
		stats[i] = c.readNodes(rec.Plan)
	}
	wg.Wait()
	if err := errors.Join(err, devErr); err != nil {
		return nil, err
	}
	for i, rec := range recs {
		c.readNetwork(s, rec, stats[i])
	}
	c.readTunnelKinds(s)
	return s, nil
}

func (c *Collector) machineOf(p *plan.Plan) string {
	if p.Host != "" {
		return p.Host
	}
	return c.machine
}

// readNetwork adds the metrics of one network, whose nodes' interfaces have counters stats
// (node -> interface -> counters; none for a node that does not run).
func (c *Collector) readNetwork(s *snapshot, rec *state.Record, stats map[string]map[string]ifStats) {
	p := rec.Plan
	machine := c.machineOf(p)
	s.out.add(famNetwork, 1, rec.Name, rec.Status, machine)
	if p.Tunnel != "" && s.tunnels[p.Tunnel] == nil {
		s.tunnels[p.Tunnel] = p
	}
	for _, n := range p.Nodes {
		s.out.add(famNodeUp, boolValue(stats[n.Name] != nil), rec.Name, n.Name, machine)
	}
	for _, l := range p.Links {
		s.out.add(famLinkUp, boolValue(!l.Down), rec.Name, l.Name, machine)
		for _, port := range l.Ports {
			c.readPort(s, rec.Name, machine, l, port, stats[port.Node][port.Ifname])
		}
		for _, t := range l.Tunnels {
			if d, ok := s.devs[t.Device]; ok {
				lv := []string{rec.Name, l.Name, t.Host, machine}
				s.out.add(famTunRxFrames, (d.RxFrames), lv...)
				s.out.add(famTunTxFrames, (d.TxFrames), lv...)
				s.out.add(famTunRxBytes, (d.RxBytes), lv...)
				s.out.add(famTunTxBytes, (d.TxBytes), lv...)
			}
		}
	}
}

// readPort adds the metrics of one port; st are its interface's counters in the node (zero if
// the node does not run).
func (c *Collector) readPort(s *snapshot, network, machine string, l *plan.Link, port plan.Port, st ifStats) {
	lv := []string{network, port.Node, l.Name, port.Ifname, machine}
	a, ok := s.devs[port.Name]
	if !ok {
		s.out.add(famPortUp, 0, lv...)
		return
	}
	s.out.add(famPortUp, boolValue(a.Up), lv...)
	s.out.add(famRxFrames, (st.RxFrames), lv...)
	s.out.add(famTxFrames, (st.TxFrames), lv...)
	s.out.add(famRxBytes, (st.RxBytes), lv...)
	s.out.add(famTxBytes, (st.TxBytes), lv...)
	s.out.add(famRxDrops, (st.RxDrops), lv...)
	s.out.add(famTxDrops, (st.TxDrops), lv...)
	s.out.add(famShaper, (s.shaper[a.Index]), lv...)
	if port.Impair.IsZero() {
		return
	}
	if ic, err := dataplane.ReadImpairCounters(a.Index); err == nil {
		s.out.add(famImpDrop, (ic.Dropped), lv...)
		s.out.add(famImpDup, (ic.Duplicated), lv...)
		s.out.add(famImpCorr, (ic.Corrupted), lv...)
	}
}

// readTunnelKinds adds the machine-wide counters of the tunnel kinds that offer them (EGRE's
// decapsulation program), once per scrape.
func (c *Collector) readTunnelKinds(s *snapshot) {
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
		s.out.add(famDecap, (e.Decapsulated), m)
		s.out.add(famUnkKey, (e.UnknownKey), m)
		s.out.add(famWrong, (e.WrongSource), m)
		s.out.add(famDecErr, (e.Errors), m)
	}
}

func boolValue(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// readNodes reads the interface counters of the running nodes of a network of plan p, a few at
// a time; a node that does not run, or ended meanwhile, has none.
func (c *Collector) readNodes(p *plan.Plan) map[string]map[string]ifStats {
	env := &kinds.Env{Store: c.st, Plan: p}
	pids := map[string]int{}
	for _, k := range kinds.NodeKinds() {
		if found, err := k.Running(env); err == nil {
			for name, in := range found {
				pids[name] = in.PID
			}
		}
	}
	out := make(map[string]map[string]ifStats, len(p.Nodes))
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if st, err := readNetDev(pids[name]); err == nil {
					mu.Lock()
					out[name] = st
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range p.Nodes {
		if pids[n.Name] != 0 {
			work <- n.Name
		}
	}
	close(work)
	wg.Wait()
	return out
}
