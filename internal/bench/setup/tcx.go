package setup

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// tcxSetup builds the prototype setup shortbridge-tcx (issue 16, item 6): the shortbridge
// setup, whose port programs are then moved from their clsact filters to the ports' tcx
// ingress (dataplane.AttachShortbridgeTCX), to measure what the tc classifier around the
// program costs.
func tcxSetup(h *Harness, nets int) (*Rig, error) {
	g := h.NewRig("shortbridge-tcx")
	g.Nets = nets
	for i := 0; i < nets; i++ {
		if err := h.addTrellisNet(g, fmt.Sprintf("bench-sbtcx-%d", i), spec.Shortbridge, false, toTCX); err != nil {
			return g, err
		}
	}
	return g, nil
}

// toTCX moves the shortbridge of every port of b to its tcx ingress, each aimed at the other
// port of its link, through bpf_redirect_peer (the bench's links have no shaper).
func toTCX(b *BenchNet) error {
	for _, l := range b.plan.Links {
		if len(l.Ports) != 2 {
			return fmt.Errorf("link %s has %d ports, not 2", l.Name, len(l.Ports))
		}
		var idx [2]int
		for i, p := range l.Ports {
			lk, err := netlink.LinkByName(p.Name)
			if err != nil {
				return fmt.Errorf("port %s: %w", p.Name, err)
			}
			idx[i] = lk.Attrs().Index
		}
		for i := range idx {
			if err := dataplane.AttachShortbridgeTCX(idx[i], idx[1-i], true); err != nil {
				return err
			}
		}
	}
	return nil
}
