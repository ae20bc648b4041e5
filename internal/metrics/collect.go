package metrics

import (
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// snapshot is what one scrape read: the metrics, and the machine-wide devices they came from.
type snapshot struct {
	out     []prometheus.Metric
	devs    map[string]device     // root namespace devices by name
	shaper  map[int]uint64        // tbf drops by device index
	tunnels map[string]*plan.Plan // a plan of each tunnel kind seen, for machine-wide counters
}

func (s *snapshot) add(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	s.out = append(s.out, prometheus.MustNewConstMetric(d, t, v, labels...))
}

func (s *snapshot) emit(ch chan<- prometheus.Metric) {
	for _, m := range s.out {
		ch <- m
	}
}

// read reads every network: one dump of the root namespace's devices and one of its qdiscs
// for all ports, and one file read per running node for its interfaces' counters.
func (c *Collector) read() (*snapshot, error) {
	recs, err := c.st.List()
	if err != nil {
		return nil, err
	}
	s := &snapshot{shaper: map[int]uint64{}, tunnels: map[string]*plan.Plan{}}
	if s.devs, err = listDevices(); err != nil {
		return nil, err
	}
	if qdiscs, err := netlink.QdiscList(nil); err == nil {
		for _, q := range qdiscs {
			if tbf, ok := q.(*netlink.Tbf); ok && tbf.Statistics != nil {
				s.shaper[tbf.LinkIndex] = uint64(tbf.Statistics.Queue.Drops)
			}
		}
	}
	for _, rec := range recs {
		c.readNetwork(s, rec)
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

// readNetwork adds the metrics of one network.
func (c *Collector) readNetwork(s *snapshot, rec *state.Record) {
	p := rec.Plan
	machine := c.machineOf(p)
	s.add(descNetwork, prometheus.GaugeValue, 1, rec.Name, rec.Status, machine)
	if p.Tunnel != "" && s.tunnels[p.Tunnel] == nil {
		s.tunnels[p.Tunnel] = p
	}
	env := &kinds.Env{Store: c.st, Plan: p}
	pids := map[string]int{}
	for _, k := range kinds.NodeKinds() {
		if found, err := k.Running(env); err == nil {
			for name, in := range found {
				pids[name] = in.PID
			}
		}
	}
	stats := readNodes(p, pids) // node -> interface -> counters
	for _, n := range p.Nodes {
		s.add(descNodeUp, prometheus.GaugeValue, boolValue(stats[n.Name] != nil), rec.Name, n.Name, machine)
	}
	for _, l := range p.Links {
		s.add(descLinkUp, prometheus.GaugeValue, boolValue(!l.Down), rec.Name, l.Name, machine)
		for _, port := range l.Ports {
			c.readPort(s, rec.Name, machine, l, port, stats[port.Node][port.Ifname])
		}
		for _, t := range l.Tunnels {
			if d, ok := s.devs[t.Device]; ok {
				lv := []string{rec.Name, l.Name, t.Host, machine}
				s.add(descTunRxFrames, prometheus.CounterValue, float64(d.RxFrames), lv...)
				s.add(descTunTxFrames, prometheus.CounterValue, float64(d.TxFrames), lv...)
				s.add(descTunRxBytes, prometheus.CounterValue, float64(d.RxBytes), lv...)
				s.add(descTunTxBytes, prometheus.CounterValue, float64(d.TxBytes), lv...)
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
		s.add(descPortUp, prometheus.GaugeValue, 0, lv...)
		return
	}
	s.add(descPortUp, prometheus.GaugeValue, boolValue(a.Up), lv...)
	s.add(descRxFrames, prometheus.CounterValue, float64(st.RxFrames), lv...)
	s.add(descTxFrames, prometheus.CounterValue, float64(st.TxFrames), lv...)
	s.add(descRxBytes, prometheus.CounterValue, float64(st.RxBytes), lv...)
	s.add(descTxBytes, prometheus.CounterValue, float64(st.TxBytes), lv...)
	s.add(descRxDrops, prometheus.CounterValue, float64(st.RxDrops), lv...)
	s.add(descTxDrops, prometheus.CounterValue, float64(st.TxDrops), lv...)
	s.add(descShaper, prometheus.CounterValue, float64(s.shaper[a.Index]), lv...)
	if port.Impair.IsZero() {
		return
	}
	if ic, err := dataplane.ReadImpairCounters(a.Index); err == nil {
		s.add(descImpDrop, prometheus.CounterValue, float64(ic.Dropped), lv...)
		s.add(descImpDup, prometheus.CounterValue, float64(ic.Duplicated), lv...)
		s.add(descImpCorr, prometheus.CounterValue, float64(ic.Corrupted), lv...)
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
		s.add(descDecap, prometheus.CounterValue, float64(e.Decapsulated), m)
		s.add(descUnkKey, prometheus.CounterValue, float64(e.UnknownKey), m)
		s.add(descWrong, prometheus.CounterValue, float64(e.WrongSource), m)
		s.add(descDecErr, prometheus.CounterValue, float64(e.Errors), m)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// readNodes reads the interface counters of a network's running nodes (pids by node name), a
// few at a time; a node that does not run, or ended meanwhile, has none.
func readNodes(p *plan.Plan, pids map[string]int) map[string]map[string]ifStats {
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
