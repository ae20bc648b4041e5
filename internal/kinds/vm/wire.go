package vm

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"github.com/trellisnet/trellis/internal/kinds/bridge"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/vishvananda/netlink"
)

// The interconnects other than tap put devices between the port and QEMU (docs/vm.md,
// "Interconnects"). The port is then a veth in the substrate, which the connectors join as any
// port; its peer (letter q in place of the port's p) leads to the guest:
//
//   - macvtap: a macvtap (letter m) in passthru mode on the peer, which QEMU opens by its
//     character device /dev/tapN, once per queue pair;
//   - bridge: a Linux bridge (letter g), with netfilter off, joining the peer and a tap (letter
//     m) that QEMU makes.
//
// The veth's peer stays in the substrate's namespace, so a connector that hands frames straight
// to a container's side of its port (the shortbridge) hands them to this port's egress instead.
const (
	peerLetter   = 'q'
	guestLetter  = 'm'
	bridgeLetter = 'g'
)

// ErrWire is returned when the devices between a port and QEMU cannot be made.
var ErrWire = errors.New("VM interconnect")

// wireName is the name of the interconnect device with letter l of port: the port's name with
// l in place of its kind letter p (tr<netid>p<n>), so it fits IFNAMSIZ as the port does.
func wireName(port string, l byte) string {
	return port[:8] + string(l) + port[9:]
}

// wireRE matches the interconnect devices that may be left over of network netID: veth peers
// (their ports and macvtaps go with them) and bridges.
func wireRE(netID string) *regexp.Regexp {
	return regexp.MustCompile(`^tr` + regexp.QuoteMeta(netID) + `[qg][0-9]+$`)
}

// interconnect of a port: the node's, tap by default.
func interconnect(s *Settings) string {
	if s == nil || s.Interconnect == "" {
		return InterconnectTap
	}
	return s.Interconnect
}

// wire makes the devices between port p and QEMU, anew, and opens, into p, what QEMU's NIC
// uses: the queues of its tap or macvtap (one per queue pair) and, where the host has
// vhost-net, a vhost-net device per queue pair. QEMU is given them: running as its
// unprivileged uid, it may open no device itself (a port hot-plugged into a running VM).
func wire(p *vmPort) error {
	if err := unwire(p.Name); err != nil { // left by a QEMU that was killed
		return err
	}
	var err error
	switch p.Interconnect {
	case InterconnectTap:
		p.files, err = openTap(p.Name, p.Queues, p.MTU)
	default:
		p.files, err = wireVeth(*p)
	}
	if err != nil {
		return err
	}
	p.vhost = openVhost(p.Queues)
	return nil
}

// wireVeth makes a macvtap or bridge port's veth and the devices behind it, and opens the
// queues of its macvtap or tap.
func wireVeth(p vmPort) ([]*os.File, error) {
	peer := wireName(p.Name, peerLetter)
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = p.Name, p.MTU
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer}); err != nil {
		return nil, fmt.Errorf("%w: port %s: %v", ErrWire, p.Name, err)
	}
	lower, err := netdev.UpQuiet(peer)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWire, err)
	}
	if p.Interconnect == InterconnectBridge {
		if err := makeBridge(p, lower); err != nil {
			return nil, err
		}
		return openTap(p.tapName(), p.Queues, p.MTU)
	}
	return makeMacvtap(p, lower)
}

// openTap makes tap name with MTU mtu (0: the kernel's) and a queue per queue pair, and returns
// the queues' files. The tap goes when the last of them is closed (its QEMU ended). Its owner and group are root: no one
// else may attach a queue to it (one without, as QEMU made them, takes a queue from anyone
// who may open /dev/net/tun, world-writable on Debian, and with it the VM's frames).
func openTap(name string, queues, mtu int) ([]*os.File, error) {
	flags := netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR
	if queues > 1 {
		flags |= netlink.TUNTAP_MULTI_QUEUE
	}
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: flags, Queues: max(queues, 1), NonPersist: true, Owner: 0, Group: 0}
	if err := netlink.LinkAdd(tap); err != nil {
		return nil, fmt.Errorf("%w: tap %s: %v", ErrWire, name, err)
	}
	if err := netdev.SetMTU(mtu, name); err != nil { // the link's (a tap is made with 1500)
		closeAll(tap.Fds)
		return nil, fmt.Errorf("%w: tap %s: %v", ErrWire, name, err)
	}
	return tap.Fds, nil
}

// openVhost opens a vhost-net device (the kernel's virtio-net back end) per queue pair, or
// none where the host has no vhost-net: QEMU then moves the frames itself.
func openVhost(queues int) []*os.File {
	var files []*os.File
	for range max(queues, 1) {
		f, err := os.OpenFile("/dev/vhost-net", os.O_RDWR, 0)
		if err != nil {
			closeAll(files)
			return nil
		}
		files = append(files, f)
	}
	return files
}

// makeMacvtap makes the port's macvtap on lower, in passthru mode (every frame that reaches
// lower goes to the guest), and opens its queues.
func makeMacvtap(p vmPort, lower netlink.Link) ([]*os.File, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex, attrs.MTU = wireName(p.Name, guestLetter), lower.Attrs().Index, p.MTU
	mv := &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_PASSTHRU}}
	if err := netlink.LinkAdd(mv); err != nil {
		return nil, fmt.Errorf("%w: macvtap on %s: %v", ErrWire, lower.Attrs().Name, err)
	}
	// The macvtap passes on only the multicast groups in its own list, which nothing fills
	// from the guest's: with all multicast on, IPv6 ND and OSPF's hellos reach the guest.
	dev, err := netdev.UpQuiet(attrs.Name)
	if err == nil {
		err = netlink.LinkSetAllmulticastOn(dev)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWire, err)
	}
	path := "/dev/tap" + strconv.Itoa(dev.Attrs().Index)
	var files []*os.File
	for range max(p.Queues, 1) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			closeAll(files)
			return nil, fmt.Errorf("%w: opening %s's queue: %v", ErrWire, attrs.Name, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// makeBridge makes the port's bridge and puts lower in it; the tap joins it once QEMU has it
// (joinBridge).
func makeBridge(p vmPort, lower netlink.Link) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = wireName(p.Name, bridgeLetter), p.MTU
	snoop := false // a bridge that snoops multicast could hold back what the guest did not report
	br := &netlink.Bridge{LinkAttrs: attrs, MulticastSnooping: &snoop}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("%w: bridge for %s: %v", ErrWire, p.Name, err)
	}
	dev, err := netdev.UpQuiet(attrs.Name)
	if err == nil {
		err = bridge.NoNetfilter(dev.Attrs().Index)
	}
	if err == nil {
		err = netlink.LinkSetMasterByIndex(lower, dev.Attrs().Index)
	}
	if err != nil {
		return fmt.Errorf("%w: bridge for %s: %v", ErrWire, p.Name, err)
	}
	return nil
}

// joinBridge puts the tap of a bridge port, which QEMU holds, into the port's bridge.
func joinBridge(p vmPort) error {
	if p.Interconnect != InterconnectBridge {
		return nil
	}
	br, err := netlink.LinkByName(wireName(p.Name, bridgeLetter))
	var tap netlink.Link
	if err == nil {
		tap, err = netdev.UpQuiet(wireName(p.Name, guestLetter))
	}
	if err == nil {
		err = netlink.LinkSetMasterByIndex(tap, br.Attrs().Index)
	}
	if err != nil {
		return fmt.Errorf("%w: tap of %s into its bridge: %v", ErrWire, p.Name, err)
	}
	return nil
}

// unwire deletes the port and the devices between it and QEMU: the veth (port and peer, the
// macvtap with them) and the bridge. (A tap goes with the last of its files: QEMU's NIC.)
func unwire(port string) error {
	for _, name := range []string{port, wireName(port, peerLetter), wireName(port, bridgeLetter)} {
		if err := netdev.Delete(name); err != nil {
			return fmt.Errorf("%w: %v", ErrWire, err)
		}
	}
	return nil
}

func closeAll(files ...[]*os.File) {
	for _, fs := range files {
		for _, f := range fs {
			f.Close()
		}
	}
}
