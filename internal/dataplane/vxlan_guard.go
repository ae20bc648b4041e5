package dataplane

// The VXLAN side of the underlay device's decapsulation program (egre.c, vxlan_check): the
// kernel's VXLAN devices take a packet for their VNI from any source, so the program lets a
// packet for a VNI of trellis's tunnels through only from a machine of that tunnel.

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Ports of trellis's VXLAN devices that vxlan_check knows (VXLAN_PORT, ENGINE_VXLAN_PORT).
const (
	VXLANPort       = 4789 // the vxlan tunnel kind's
	EngineVXLANPort = 4792 // the tunnels to remote engines'
)

// ErrVXLANPort is returned for a port vxlan_check does not watch.
var ErrVXLANPort = errors.New("not a VXLAN port of trellis")

// vxlanPeerKey is the vxlan_peers key of (port, vni, remote): the VXLAN header's second word
// as it is on the wire, with its reserved low byte replaced by the port's tag.
func vxlanPeerKey(port uint16, vni uint32, remote netip.Addr) (egreTunnelKey, error) {
	var tag uint32
	switch port {
	case VXLANPort:
	case EngineVXLANPort:
		tag = 1
	default:
		return egreTunnelKey{}, fmt.Errorf("%w: %d", ErrVXLANPort, port)
	}
	if vni == 0 || vni > 0xffffff {
		return egreTunnelKey{}, fmt.Errorf("invalid VNI %d", vni)
	}
	return egreTunnelKey{Key: be32(vni<<8 | tag), RemoteIp: ipv4Word(remote)}, nil
}

// AddVXLAN lets VXLAN packets to UDP port port with VNI vni through from remote; packets with
// that VNI from machines no AddVXLAN named are dropped (and counted, VXLANRefused). Adding a
// peer twice does nothing.
func (d *Decap) AddVXLAN(port uint16, vni uint32, remote netip.Addr) error {
	if err := d.addVXLAN(port, vni, remote); err != nil {
		return fmt.Errorf("dataplane: VXLAN peer add (port %d, VNI %d, remote %v): %w", port, vni, remote, err)
	}
	return nil
}

func (d *Decap) addVXLAN(port uint16, vni uint32, remote netip.Addr) error {
	if err := checkUnderlayAddr("remote", remote); err != nil {
		return err
	}
	k, err := vxlanPeerKey(port, vni, remote)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	one := uint32(1)
	switch err := d.vxPeers.Update(&k, &one, ebpf.UpdateNoExist); {
	case errors.Is(err, ebpf.ErrKeyExist):
		return nil
	case err != nil:
		return fmt.Errorf("adding peer: %w", err)
	}
	if err := adjustCount(d.vxVNIs, k.Key, +1); err != nil {
		_ = d.vxPeers.Delete(&k) // leave the maps as they were
		return err
	}
	return nil
}

// DeleteVXLAN removes a peer AddVXLAN added; removing one that is not there does nothing.
// Once a VNI has no peer left, its packets pass untouched again (to the kernel, which drops
// them unless it has a device for the VNI).
func (d *Decap) DeleteVXLAN(port uint16, vni uint32, remote netip.Addr) error {
	k, err := vxlanPeerKey(port, vni, remote)
	if err == nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		if err = d.vxPeers.Delete(&k); errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		} else if err == nil {
			err = adjustCount(d.vxVNIs, k.Key, -1)
		}
	}
	if err != nil {
		return fmt.Errorf("dataplane: VXLAN peer delete (port %d, VNI %d, remote %v): %w", port, vni, remote, err)
	}
	return nil
}
