package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// A second prototype of the shortbridge (issue 16, item 6), measured by the bench's
// shortbridge-xdp setup: XDP on the veth ports, each frame redirected through a one-entry
// device map (no ifindex lookup per frame) to the other port, whose transmit hands it to the
// node's interface as an XDP frame. A veth accepts XDP frames only when its receiving end has
// an XDP program of its own (or NAPI), so the node's interface gets a program that passes
// every frame. The frames the generator sends are skbs: each is converted to an XDP buffer on
// the port (a copy when its headroom is short of XDP's 256 bytes) and back to an skb in the
// node. Not used by the connectors: the node would hold an XDP program on its own interface,
// frames larger than a page need a multi-buffer program, and the port's tc hooks (shaper,
// impairment) are skipped.

// ErrXDPAttach is returned when an XDP program cannot be loaded or attached.
var ErrXDPAttach = errors.New("dataplane: xdp attach")

const xdpPass = 2 // XDP_PASS

// AttachShortbridgeXDP puts on the port with index portIfindex (driver mode) an XDP program
// that redirects every frame out of the port peerIfindex, through a device map.
func AttachShortbridgeXDP(portIfindex, peerIfindex int) error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "sb_xdp_peer", Type: ebpf.DevMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("%w: port %d: device map: %w", ErrXDPAttach, portIfindex, err)
	}
	defer m.Close() // the program holds it
	if err := m.Put(uint32(0), uint32(peerIfindex)); err != nil {
		return fmt.Errorf("%w: port %d: peer %d in the device map: %w", ErrXDPAttach, portIfindex, peerIfindex, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "sb_xdp", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Imm(asm.R2, 0),
			asm.Mov.Imm(asm.R3, 0), // a missing entry aborts the frame
			asm.FnRedirectMap.Call(),
			asm.Return(),
		}})
	if err != nil {
		return fmt.Errorf("%w: port %d: %w", ErrXDPAttach, portIfindex, err)
	}
	defer prog.Close() // the device holds it
	lk, err := netlink.LinkByIndex(portIfindex)
	if err == nil {
		err = netlink.LinkSetXdpFdWithFlags(lk, prog.FD(), nl.XDP_FLAGS_DRV_MODE)
	}
	if err != nil {
		return fmt.Errorf("%w: port %d: %w", ErrXDPAttach, portIfindex, err)
	}
	return nil
}

// AttachXDPPass puts on interface ifname of the calling thread's namespace (driver mode) an
// XDP program that passes every frame: a veth takes XDP frames from a redirect only when it has
// one.
func AttachXDPPass(ifname string) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xdp_pass", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()}})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrXDPAttach, ifname, err)
	}
	defer prog.Close()
	lk, err := netlink.LinkByName(ifname)
	if err == nil {
		err = netlink.LinkSetXdpFdWithFlags(lk, prog.FD(), nl.XDP_FLAGS_DRV_MODE)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrXDPAttach, ifname, err)
	}
	return nil
}
