package spec

// The built-in kinds, registered here until internal/kinds/* register themselves: this file
// goes when they do.
func init() {
	RegisterNodeKind(DefaultNodeKind, NodeKind{})
	RegisterLinkKind(Shortbridge, LinkKind{MinEndpoints: 2, MaxEndpoints: 2})
	RegisterLinkKind(Bridge, LinkKind{MinEndpoints: 2})
	// Inner Ethernet header, outer IPv4, GRE with a key.
	RegisterTunnelKind(EGRE, TunnelKind{Overhead: 14 + 20 + 8})
	// Inner Ethernet header, outer IPv4, UDP, VXLAN.
	RegisterTunnelKind(VXLAN, TunnelKind{Overhead: 14 + 20 + 8 + 8})
}
