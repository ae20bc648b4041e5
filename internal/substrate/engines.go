package substrate

import (
	"context"
	"fmt"
	"sort"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/enginehelper"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/kinds/egre"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/trellisnet/trellis/internal/state"
)

// engineChanges lists the nodes whose forwarding engines (internal/enginehelper) must be started,
// replaced or stopped: those not running as plan p configures them. Nodes that restart are
// not listed (their engines follow them).
// recorded are the plans the network's record holds besides p (see enginesMayRun).
func engineChanges(st *state.Store, old, p *plan.Plan, recorded []*plan.Plan, running map[string]kinds.Instance) ([]Change, error) {
	if !enginesMayRun(p, recorded) {
		return nil, nil
	}
	pending, err := enginehelper.Pending(st.Dir, st.ID, p, pids(running))
	if err != nil {
		return nil, err
	}
	var out []Change
	for name, why := range pending {
		in, ok := running[name]
		if n := p.Node(name); n != nil && (!ok || in.Digest != n.Digest) {
			continue // the node starts again, and its engines with it
		}
		what := []string{why}
		if on, n := nodeOf(old, name), p.Node(name); on != nil && n != nil && len(on.Engines) != len(n.Engines) {
			what = []string{fmt.Sprintf("engines %d -> %d", len(on.Engines), len(n.Engines))}
		}
		out = append(out, Change{Op: "change", Object: "engines", Name: name, What: what})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func pids(running map[string]kinds.Instance) map[string]int {
	out := make(map[string]int, len(running))
	for name, in := range running {
		out[name] = in.PID
	}
	return out
}

// convergeEngines starts, replaces or stops the nodes' engines; after the links, so that the
// ports they attach to exist and deliver through their egress. The VXLAN tunnels to remote
// engines are vetted from before their devices exist until after they are gone.
func (a *applier) convergeEngines(ctx context.Context) error {
	if !enginesMayRun(a.env.Plan, a.recorded) {
		return nil
	}
	p := a.env.Plan
	if err := guardEngines(a.env.Store, p, true, nil); err != nil {
		return err
	}
	if err := enginehelper.Converge(ctx, a.env.Store.Dir, a.env.Store.ID, p, pids(a.running)); err != nil {
		return err
	}
	keep := map[plan.VXLANPeer]bool{}
	for _, v := range p.EnginePeers() {
		keep[v] = true
	}
	for _, q := range a.recorded {
		if err := guardEngines(a.env.Store, q, false, keep); err != nil {
			return err
		}
	}
	return nil
}

// guardEngines adds the VXLAN tunnels of plan p to remote engines to the machine's
// decapsulation program, which then takes their packets from the engine's (or node's) machine
// only; or removes those not in keep.
func guardEngines(st *state.Store, p *plan.Plan, add bool, keep map[plan.VXLANPeer]bool) error {
	if p == nil {
		return nil
	}
	peers := p.EnginePeers()
	if len(peers) == 0 {
		return nil
	}
	underlay, err := netdev.Underlay(p.Local)
	if err != nil {
		if add {
			return err
		}
		return nil // the underlay is gone, and the program with it
	}
	return egre.WithDecap(&kinds.Env{Store: st, Plan: p}, underlay, add, func(d *dataplane.Decap) error {
		for _, v := range peers {
			var err error
			if add {
				err = d.AddVXLAN(plan.EngineVXLANPort, v.VNI, v.Remote)
			} else if !keep[v] {
				err = d.DeleteVXLAN(plan.EngineVXLANPort, v.VNI, v.Remote)
			}
			if err != nil {
				return fmt.Errorf("remote engines: %w", err)
			}
		}
		return nil
	})
}

// enginesMayRun tells whether helpers of forwarding engines (internal/enginehelper) may run for
// the network of plan p, whose record holds the plans recorded besides p: only a node with
// engines, or another machine's node whose engines this machine holds, has a helper, and a
// change away from such a plan stops the helpers it no longer wants. With no recorded plan (a
// network new to the machine, or no record) a helper left over may run. Finding the helpers
// reads every process's command line, which takes as long as the machine has processes, so a
// network that cannot have any is not searched.
func enginesMayRun(p *plan.Plan, recorded []*plan.Plan) bool {
	if len(recorded) == 0 {
		return true
	}
	for _, q := range append([]*plan.Plan{p}, recorded...) {
		if q == nil {
			continue
		}
		if len(q.Hosted) > 0 {
			return true
		}
		for _, n := range q.Nodes {
			if len(n.Engines) > 0 {
				return true
			}
		}
	}
	return false
}

// nodeOf returns plan p's node name, or nil (also for no plan).
func nodeOf(p *plan.Plan, name string) *plan.Node {
	if p == nil {
		return nil
	}
	return p.Node(name)
}

// EnginesInfo describes a node's forwarding engines, for `trellis inspect`.
type EnginesInfo struct {
	Dispatch  string                    `json:"dispatch"`
	PID       int                       `json:"pid"`               // the helper holding them; 0: not running
	ToControl uint64                    `json:"to_control"`        // frames the classifier sent to the node itself
	Policed   uint64                    `json:"policed,omitempty"` // frames over a link's rate, dropped
	Engines   []EngineInfo              `json:"engines"`
	Mirror    enginehelper.MirrorStatus `json:"mirror"`
}

// EngineInfo counts one engine's frames.
type EngineInfo struct {
	Index      int     `json:"index"`
	Classified uint64  `json:"classified"`      // transit frames the classifier sent to it
	RxPackets  uint64  `json:"rx_packets"`      // frames it received (its substrate ends' tx)
	TxPackets  uint64  `json:"tx_packets"`      // frames it sent out through the node's ports
	CPUs       []int   `json:"cpus,omitempty"`  // its cores: given in the file, or from its share
	Share      float64 `json:"share,omitempty"` // the share of cores it asked for (cpus: 0.5)
	Host       string  `json:"host,omitempty"`  // the machine it runs on, when not the node's
	Down       bool    `json:"down,omitempty"`  // on another machine and not reached, or its VM gone: given no frames
	VM         bool    `json:"vm,omitempty"`    // a VM of its own (an engine of a VM node)
}

// enginesInfo reads the engines of node n from its helper's status and its devices' counters.
func enginesInfo(st *state.Store, netID string, n *plan.Node, devs map[string]rtnl.Link) *EnginesInfo {
	if len(n.Engines) == 0 {
		return nil
	}
	ei := &EnginesInfo{}
	if n.Dispatch != nil {
		ei.Dispatch = n.Dispatch.Mode
	}
	s, _ := enginehelper.ReadStatus(st.Dir, netID, n.Name)
	if found, err := enginehelper.Find(st.ID, netID); err == nil {
		ei.PID = found[n.Name].PID
	}
	if s != nil && ei.PID != 0 {
		ei.ToControl, ei.Mirror, ei.Policed = s.Control, s.Mirror, s.Policed
	}
	for i, e := range n.Engines {
		info := EngineInfo{Index: i, CPUs: e.CPUs, Share: e.Share}
		if s != nil && ei.PID != 0 && i < len(s.Engines) {
			info.Classified, info.CPUs = s.Engines[i].Classified, s.Engines[i].CPUs
			info.Host, info.Down, info.VM = s.Engines[i].Host, s.Engines[i].Down, s.Engines[i].VM
		}
		if i < len(n.FEPorts) {
			for _, name := range n.FEPorts[i] {
				if d, ok := devs[name]; ok {
					info.RxPackets += d.Stats.TxPackets
					info.TxPackets += d.Stats.RxPackets
				}
			}
		}
		ei.Engines = append(ei.Engines, info)
	}
	return ei
}
