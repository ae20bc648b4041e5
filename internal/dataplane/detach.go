package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DetachForwarding removes the forwarding program (shortbridge, EGRE encapsulation or LAN:
// they share one slot) from the ingress of a port, on tcx and under clsact, so that the port's
// frames go wherever the kernel sends them (e.g. into a bridge the port joins). No program
// there is not an error.
func DetachForwarding(portIfindex int) error {
	if err := detachTCXNamed(portIfindex, shortbridgeProgName); err != nil {
		return fmt.Errorf("dataplane: detaching the forwarding program of port %d: %w", portIfindex, err)
	}
	if err := deleteForwardFilters(portIfindex); err != nil {
		return fmt.Errorf("dataplane: detaching the forwarding filter of port %d: %w", portIfindex, err)
	}
	return nil
}

// deleteForwardFilters deletes the port's forwarding tc filter, at its priority and at the old
// one (forward.go), if there is one. A port without a clsact qdisc has none: one netlink round
// trip tells.
func deleteForwardFilters(portIfindex int) error {
	for _, prio := range []uint16{forwardFilterPriority, legacyForwardFilterPriority} {
		err := netlink.FilterDel(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{
			LinkIndex: portIfindex,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    shortbridgeFilterHandle,
			Priority:  prio,
			Protocol:  unix.ETH_P_ALL,
		}})
		switch {
		case errors.Is(err, unix.EINVAL):
			return nil // no clsact qdisc (or no filter at that priority)
		case err != nil && !errors.Is(err, unix.ENOENT):
			return fmt.Errorf("deleting the filter at priority %d: %w", prio, err)
		}
	}
	return nil
}
