package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/vmsock"
)

// sweepTimeout bounds the unplugging of the NICs of one VM.
const sweepTimeout = time.Minute

// Sweep removes what VM nodes leave outside QEMU when they or their links go: the control
// groups, disk overlays and socket directories of VMs that do not run, the interconnect
// devices of ports that no running VM has in the plan (a VM killed, a link removed), and, in
// a running VM, the NIC of every interface the plan no longer gives it (its link was removed:
// the NIC would stay in the guest without a back end).
func (Kind) Sweep(env *kinds.Env, running map[string]kinds.Instance) error {
	if env.Plan == nil {
		return nil
	}
	if err := sweepGroups(env, running); err != nil {
		return err
	}
	if err := sweepOverlays(env, running); err != nil {
		return err
	}
	if err := sweepSockets(env, running); err != nil {
		return err
	}
	keep := map[string]bool{}
	for name, in := range running {
		n := env.Plan.Node(name)
		if in.Kind != Name || n == nil {
			continue
		}
		for _, p := range ports(env.Plan, n) {
			keep[p.Name] = true
		}
		if err := unplugGone(env, n); err != nil {
			return fmt.Errorf("VM %s: %w", name, err)
		}
	}
	return sweepWires(env, keep)
}

// sweepSockets removes the socket directories of the network's VMs that do not run (QEMU was
// killed, or trellis while it started one): those of running VM nodes and of their engine VMs
// stay.
func sweepSockets(env *kinds.Env, running map[string]kinds.Instance) error {
	var keep []string
	for name, in := range running {
		if in.Kind != Name {
			continue
		}
		keep = append(keep, name)
		if n := env.Plan.Node(name); n != nil {
			for i := range n.Engines {
				keep = append(keep, feName(name, i))
			}
		}
	}
	return vmsock.Sweep(env.Store.ID, env.Plan.NetID, keep)
}

// listDevices lists the devices of the substrate's namespace (a variable for the tests).
var listDevices = netdev.List

// sweepWires removes the interconnect devices of the network whose ports are not in keep. Only
// a VM node with an interconnect other than tap makes them, so a network that has none in its
// plan or in the plans its record holds has none to remove, and the machine's devices are not
// listed: a listing takes as long as the machine has devices, and every `up` of every network
// sweeps (a cluster's agent re-placing a hundred networks at once listed the machine's
// thousands of devices for each of them).
func sweepWires(env *kinds.Env, keep map[string]bool) error {
	if !mayHaveWires(append([]*plan.Plan{env.Plan}, env.Recorded...)) {
		return nil
	}
	devs, err := listDevices()
	if err != nil {
		return err
	}
	re := wireRE(env.Plan.NetID)
	for _, d := range devs {
		name := d.Attrs().Name
		if re.MatchString(name) && !keep[wireName(name, 'p')] {
			if err := unwire(wireName(name, 'p')); err != nil {
				return err
			}
		}
	}
	return nil
}

// unplugGone unplugs the NICs of VM node n whose interfaces have no port in the plan.
func unplugGone(env *kinds.Env, n *plan.Node) error {
	want := map[string]bool{}
	for _, p := range ports(env.Plan, n) {
		want[deviceID(p.Ifname)] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	m, err := dialQMP(ctx, vmsock.Path(env.Store.ID, env.Plan.NetID, n.Name, vmsock.Monitor))
	if err != nil {
		return err
	}
	defer m.Close()
	nics, err := m.nics(ctx)
	if err != nil {
		return err
	}
	for _, id := range nics {
		if !want[id] {
			if err := m.unplug(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// nics lists the VM's NICs that trellis plugged, by device id.
func (m *qmp) nics(ctx context.Context) ([]string, error) {
	msg, err := m.execute(ctx, "qom-list", map[string]string{"path": "/machine/peripheral"})
	if err != nil {
		return nil, err
	}
	var props []struct{ Name string }
	if err := json.Unmarshal(msg.Return, &props); err != nil {
		return nil, fmt.Errorf("QEMU monitor: qom-list: %w", err)
	}
	var out []string
	for _, p := range props {
		if strings.HasPrefix(p.Name, deviceID("")) {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// mayHaveWires tells whether any of plans has a VM node whose ports have interconnect devices.
func mayHaveWires(plans []*plan.Plan) bool {
	for _, p := range plans {
		if p == nil {
			continue
		}
		for _, n := range p.Nodes {
			if n.Kind == Name && interconnect(knobs(n.Node)) != InterconnectTap {
				return true
			}
		}
	}
	return false
}
