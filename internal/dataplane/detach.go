package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DetachForwarding removes the forwarding filter (shortbridge or EGRE encapsulation: they share
// one slot) from the tc ingress of a port, so that the port's frames go wherever the kernel
// sends them (e.g. into a bridge the port joins). No filter there is not an error.
func DetachForwarding(portIfindex int) error {
	filter := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{
		LinkIndex: portIfindex,
		Parent:    netlink.HANDLE_MIN_INGRESS,
		Handle:    shortbridgeFilterHandle,
		Priority:  shortbridgeFilterPriority,
		Protocol:  unix.ETH_P_ALL,
	}}
	err := netlink.FilterDel(filter)
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	return fmt.Errorf("dataplane: detaching the forwarding filter of port %d: %w", portIfindex, err)
}
