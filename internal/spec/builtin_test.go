package spec

// The kinds trellis registers (internal/kinds/*), registered here for the spec tests, which
// cannot import those packages (they import spec).
func init() {
	RegisterNodeKind(DefaultNodeKind, NodeKind{Rootfs: true})
	RegisterNodeKind("vm", NodeKind{VM: true})
	RegisterLinkKind(Shortbridge, LinkKind{MinEndpoints: 2, MaxEndpoints: 2})
	RegisterLinkKind(Bridge, LinkKind{MinEndpoints: 2})
	RegisterLinkKind(LAN, LinkKind{MinEndpoints: 2, MaxEndpoints: 4096})
	// Inner Ethernet header, outer IPv4, GRE with a key.
	RegisterTunnelKind(EGRE, TunnelKind{Overhead: 14 + 20 + 8})
	// Inner Ethernet header, outer IPv4, UDP, VXLAN.
	RegisterTunnelKind(VXLAN, TunnelKind{Overhead: 14 + 20 + 8 + 8, OneDevice: true})
}
