// Package bridge is the link kind "bridge": a LAN joined by a Linux bridge in the substrate,
// which learns addresses and floods broadcasts, so ARP, neighbour discovery and non-IP frames
// reach every member. The eBPF connector "lan" is the default for LANs; this one stays for
// whoever asks for it (`connector: bridge`).
package bridge

import (
	"context"
	"fmt"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Name is the kind's name in topology files.
const Name = "bridge"

func init() { kinds.RegisterLink(Name, Kind{}, spec.LinkKind{MinEndpoints: 2}) }

// Kind is the bridge link kind.
type Kind struct{}

// Direct: frames from a tunnel enter the bridge, which decides where they go.
func (Kind) Direct() bool { return false }

// Join makes the LAN's bridge (the link's Device) and enslaves its ports and tunnel devices.
// The bridge has no address and no IPv6, so the substrate never takes part in the LAN's
// traffic. Tunnel devices are isolated from each other: what came from one machine is not sent
// on to another, which has its own tunnel from the sender (split horizon; no loops in a full
// mesh). Members already enslaved are left as they are.
func (Kind) Join(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	br, err := netdev.ByName(l.Device)
	if err != nil {
		return err
	}
	if br == nil {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: l.Device}}); err != nil {
			return fmt.Errorf("bridge %s: %w", l.Device, err)
		}
		if br, err = netlink.LinkByName(l.Device); err != nil {
			return fmt.Errorf("bridge %s: %w", l.Device, err)
		}
	}
	if err := NoNetfilter(br.Attrs().Index); err != nil {
		return fmt.Errorf("bridge %s: %w", l.Device, err)
	}
	if br, err = netdev.UpQuiet(l.Device); err != nil {
		return fmt.Errorf("bridge %w", err)
	}
	for _, p := range append(append([]netlink.Link{}, m.Ports...), m.Tunnels...) {
		if p.Attrs().MasterIndex == br.Attrs().Index {
			continue
		}
		if err := netlink.LinkSetMaster(p, br); err != nil {
			return fmt.Errorf("bridge %s: adding %s: %w", l.Device, p.Attrs().Name, err)
		}
	}
	for _, t := range m.Tunnels {
		if err := netlink.LinkSetIsolated(t, true); err != nil {
			return fmt.Errorf("bridge %s: isolating %s: %w", l.Device, t.Attrs().Name, err)
		}
	}
	return nil
}

// Leave deletes the bridge; its members leave it with it.
func (Kind) Leave(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	return netdev.Delete(l.Device)
}

// NoNetfilter turns the bridge's own bridge-netfilter options off (nf_call_iptables,
// nf_call_ip6tables, nf_call_arptables: `ip link set BR type bridge nf_call_iptables 0`), so
// that the bridge does not send its frames through the IP, IPv6 and ARP firewall hooks. The
// kernel calls those hooks when either the bridge's option or the namespace's sysctl
// (net.bridge.bridge-nf-call-iptables and the others, 1 by default wherever br_netfilter is
// loaded or built in) is on: the bridge's options can only add the hooks, so on a host with the
// sysctls on its bridges still pay for them (docs/architecture.md, "Bridge (LAN)"); the LAN
// connector "lan" has no bridge and never meets them.
func NoNetfilter(index int) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	for _, opt := range []int{unix.IFLA_BR_NF_CALL_IPTABLES, unix.IFLA_BR_NF_CALL_IP6TABLES, unix.IFLA_BR_NF_CALL_ARPTABLES} {
		data.AddRtAttr(opt, nl.Uint8Attr(0))
	}
	req.AddData(info)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("turning bridge netfilter off: %w", err)
	}
	return nil
}
