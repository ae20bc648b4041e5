package veth

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A direct link taken down or impaired keeps its veth pair (docs/design.md, decision 5):
//
//   - Its frames are dropped, and impaired, on the tcx ingress of the end that receives them
//     (dataplane.SetLinkDown, SetDirectImpairment), where a node's root cannot lift it.
//   - A node whose end is down sees NO-CARRIER on it, as on a port taken down: the end is put
//     in link mode dormant with operational state DORMANT (RFC 2863), so it is up without
//     IFF_RUNNING, and bird, FRR and the kernel's IPv6 see the link down. Unlike a carrier
//     taken away, nothing is flushed: the routes and addresses of the node's software stay.
//     A node's root may set the state back up; its frames are still dropped.
//
// A pair taken down whole has both ends dormant; one endpoint taken down, only that end (the
// other node sees its link up, as with one port down); either way no frame crosses.

func init() { plan.WireEnforces = dataplane.HasTCX }

// IF_LINK_MODE_* and IF_OPER_* of linux/if.h.
const (
	linkModeDefault = 0
	linkModeDormant = 1
	operDormant     = 5
	operUp          = 6
)

// enforced tells whether link l has anything for enforce to do on a pair just made.
func enforced(l *plan.Link) bool {
	if l.Down {
		return true
	}
	for _, port := range l.Ports {
		if port.Down || !port.Impair.IsZero() {
			return true
		}
	}
	return false
}

// enforce brings the two ends of link l, in namespaces ns, to the link's state and
// impairments: what each end receives is the other end's frames, impaired as that endpoint's.
func enforce(l *plan.Link, ns [2]netns.NsHandle) error {
	down := l.Down || l.Ports[0].Down || l.Ports[1].Down
	for i, port := range l.Ports {
		from := l.Ports[1-i]
		im := dataplane.Impairment{Loss: from.Impair.Loss, LossCorrelation: from.Impair.LossCorrelation,
			Duplicate: from.Impair.Duplicate, Corrupt: from.Impair.Corrupt}
		err := netnsutil.Do(ns[i], func() error {
			end, err := netlink.LinkByName(port.Ifname)
			if err != nil {
				return err
			}
			idx := end.Attrs().Index
			if err := dataplane.SetLinkDown(idx, down); err != nil {
				return err
			}
			if err := dataplane.SetDirectImpairment(idx, im); err != nil {
				return err
			}
			return setDormant(idx, l.Down || port.Down)
		})
		if err != nil {
			return fmt.Errorf("interface %s: %w", port, err)
		}
	}
	return nil
}

// setDormant puts interface ifindex in link mode dormant with operational state DORMANT
// (down), or back to the default mode and state UP (which the kernel gives only to an
// interface up with a carrier), in the calling thread's namespace.
func setDormant(ifindex int, down bool) error {
	mode, oper := byte(linkModeDefault), byte(operUp)
	if down {
		mode, oper = linkModeDormant, operDormant
	}
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFLA_LINKMODE, []byte{mode}))
	req.AddData(nl.NewRtAttr(unix.IFLA_OPERSTATE, []byte{oper}))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("link mode %d, state %d: %w", mode, oper, err)
	}
	return nil
}
