package substrate

import (
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/delay"
	"github.com/trellisnet/trellis/internal/enginehelper"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/tablesock"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// hostMachine is this machine's kernel and processes: the machine of every Up and Down but
// unit tests'.
type hostMachine struct{}

func (hostMachine) Devices() ([]netlink.Link, error)         { return netdev.List() }
func (hostMachine) Device(name string) (netlink.Link, error) { return netdev.ByName(name) }
func (hostMachine) DeleteDevice(name string) error           { return netdev.Delete(name) }
func (hostMachine) SetMTU(name string, mtu int) error        { return netdev.SetMTU(mtu, name) }
func (hostMachine) SetCarrier(name string, up bool) error    { return setCarrier(name, up) }

func (hostMachine) SetShaper(dev netlink.Link, rate uint64) error { return setShaper(dev, rate) }

func (hostMachine) SetImpairment(cfg dataplane.Config, ifindex int, im dataplane.Impairment) error {
	return dataplane.SetImpairment(cfg, ifindex, im)
}

func (hostMachine) DetachDelay(ifindex int) error { return dataplane.DetachDelay(ifindex) }

func (hostMachine) EndHelpers(dir, stateID, netID string) error {
	if err := enginehelper.Remove(dir, stateID, netID); err != nil {
		return err
	}
	if err := delay.KillExcept(stateID, netID, nil); err != nil {
		return err
	}
	return tablesock.KillExcept(stateID, netID, nil)
}

func (hostMachine) EndLinesExcept(pids []int, stateID, netID string, keep map[string]bool) error {
	return delay.KillExceptIn(pids, stateID, netID, keep)
}

func (hostMachine) OpenPortNS(netID string) (netns.NsHandle, bool, error) { return OpenPortNS(netID) }
func (hostMachine) MakePortNS(netID string) (netns.NsHandle, error)       { return makePortNS(netID) }
func (hostMachine) RemovePortNS(netID string) error                       { return removePortNS(netID) }
func (hostMachine) NodeKinds() map[string]kinds.Node                      { return kinds.NodeKinds() }
