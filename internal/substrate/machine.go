package substrate

import (
	"context"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// machine is what the reconciler does to this machine itself, besides what the kinds do (they
// are behind interfaces of their own, internal/kinds): the network's substrate devices, the
// helper processes it runs beside the nodes, its port namespace, and which node kinds may have
// nodes running. Up, changes and Down go through the machine in their context (withMachine):
// the host's (hostMachine) but in unit tests, which hand them a fake that keeps the machine in
// memory (fake_test.go), so that the reconciler's logic runs without root.
//
// What a network with delays, forwarding engines, eBPF programs or tunnels does goes to the
// kernel directly (delay.go, engines.go, dataplane.go, the tunnel kinds): the integration
// tests cover it.
type machine interface {
	// Devices lists the devices where the calling thread is (the root or the port namespace).
	Devices() ([]netlink.Link, error)
	// Device returns device name, or nil if there is none.
	Device(name string) (netlink.Link, error)
	// DeleteDevice deletes device name; one that is gone already is no error.
	DeleteDevice(name string) error
	// SetMTU sets the MTU of device name.
	SetMTU(name string, mtu int) error
	// SetCarrier brings a port up (IPv6 disabled) or down (setCarrier).
	SetCarrier(name string, up bool) error
	// SetShaper caps the rate a device sends at rate bit/s, or removes its cap (rate 0).
	SetShaper(dev netlink.Link, rate uint64) error
	// SetImpairment sets the loss, duplication and corruption of the frames through port ifindex
	// (on the hook cfg chooses).
	SetImpairment(cfg dataplane.Config, ifindex int, im dataplane.Impairment) error
	// DetachDelay sends the frames of port ifindex straight on again, not through its delay
	// pair (there may be none).
	DetachDelay(ifindex int) error
	// EndHelpers ends every helper process of network netID (forwarding engines' helpers,
	// delay lines, table servers) of the state directory dir (id stateID).
	EndHelpers(dir, stateID, netID string) error
	// EndLinesExcept ends the delay lines of network netID but those of hold devices in keep,
	// looking among processes pids (nil: every process).
	EndLinesExcept(pids []int, stateID, netID string, keep map[string]bool) error
	// OpenPortNS opens the network's port namespace; ok is false if it has none.
	OpenPortNS(netID string) (ns netns.NsHandle, ok bool, err error)
	// MakePortNS makes the network's port namespace, or opens it if it exists.
	MakePortNS(netID string) (netns.NsHandle, error)
	// RemovePortNS removes the network's port namespace, if it has one.
	RemovePortNS(netID string) error
	// NodeKinds are the node kinds whose running nodes the reconciler looks for.
	NodeKinds() map[string]kinds.Node
}

type machineKey struct{}

// withMachine returns ctx with the machine that Up, changes and Down act on (unit tests).
func withMachine(ctx context.Context, m machine) context.Context {
	return context.WithValue(ctx, machineKey{}, m)
}

// machineFrom returns the machine in ctx: the host's unless a test put another there.
func machineFrom(ctx context.Context) machine {
	if m, ok := ctx.Value(machineKey{}).(machine); ok {
		return m
	}
	return hostMachine{}
}

// deviceSnapshot lists the devices of machine m (where the calling thread is) by network.
func deviceSnapshot(m machine) (*Snapshot, error) {
	taken := time.Now() // before the listing: a device made during it counts as after
	all, err := m.Devices()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, d := range all {
		names[i] = d.Attrs().Name
	}
	return snapshotOf(taken, names), nil
}
