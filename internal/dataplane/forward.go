package dataplane

// The order of the filters on a port's tc ingress.
//
// A frame a node sends meets, in this order (tc runs lower priority numbers
// first):
//
//	priority 1, handle 0x1a  trellis_impair    loss, duplication, corruption
//	                                           (only on impaired links)
//	priority 2, handle 0x5b  trellis_sb or     forwarding to the other end
//	                         trellis_egre_enc  (none on a LAN port: the bridge
//	                                           takes the frame afterwards)
//
// The two kinds of filter have priorities of their own because that is the
// only order tc guarantees. Within one priority cls_bpf keeps its filters in
// a list where a new filter goes in front and a replaced one keeps its place,
// so their order would depend on which was attached first; and priority 0
// asks the kernel to pick one, which tells nothing about the order either.
// Forwarding keeps its own fixed handle and priority, so attaching a
// shortbridge or an encapsulation program still replaces the one before it in
// place, and the impairment filter comes and goes in front of it without
// touching it.
//
// Ports set up before impairments existed have their forwarding filter at
// priority 1. Attaching a forwarding program removes such a filter once its
// replacement at priority 2 is in place (the old one runs first until it is
// gone, so no frame finds the port without a program), and adding an
// impairment first moves it to priority 2, program and all.

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	impairFilterPriority        = 1
	forwardFilterPriority       = 2
	legacyForwardFilterPriority = 1
)

// isForwardFilter tells a forwarding filter of a port by its name.
func isForwardFilter(f *netlink.BpfFilter) bool {
	return f.Name == shortbridgeFilterName || f.Name == egreEncapFilterName || f.Name == lanFilterName
}

// legacyForwardFilters returns the forwarding filters at the old priority on
// the port's tc ingress.
func legacyForwardFilters(h *netlink.Handle, portIfindex int) ([]*netlink.BpfFilter, error) {
	filters, err := listFilters(h, portIfindex, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return nil, fmt.Errorf("listing ingress filters: %w", err)
	}
	var old []*netlink.BpfFilter
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && isForwardFilter(bf) &&
			bf.Priority == legacyForwardFilterPriority {
			old = append(old, bf)
		}
	}
	return old, nil
}

// replaceForwardFilter attaches a forwarding filter (whose priority must be
// forwardFilterPriority) in place of the port's current one, then removes a
// forwarding filter left at the old priority.
func replaceForwardFilter(h *netlink.Handle, f *netlink.BpfFilter) error {
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("replacing tc ingress filter: %w", err)
	}
	old, err := legacyForwardFilters(h, f.LinkIndex)
	if err != nil {
		return err
	}
	for _, o := range old {
		if err := h.FilterDel(o); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("deleting forwarding filter at priority %d: %w", o.Priority, err)
		}
	}
	return nil
}

// moveLegacyForwardFilter moves a forwarding filter from the old priority to
// forwardFilterPriority, with the same program, so that a filter can run
// before it at priority 1.
func moveLegacyForwardFilter(h *netlink.Handle, portIfindex int) error {
	old, err := legacyForwardFilters(h, portIfindex)
	if err != nil {
		return err
	}
	for _, o := range old {
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(o.Id))
		if err != nil {
			return fmt.Errorf("opening program %d of filter %s: %w", o.Id, o.Name, err)
		}
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{
				LinkIndex: portIfindex,
				Parent:    netlink.HANDLE_MIN_INGRESS,
				Handle:    o.Handle,
				Priority:  forwardFilterPriority,
				Protocol:  unix.ETH_P_ALL,
			},
			Fd:           prog.FD(),
			Name:         o.Name,
			DirectAction: true,
		}
		err = replaceForwardFilter(h, f)
		prog.Close()
		if err != nil {
			return fmt.Errorf("moving %s to priority %d: %w", o.Name, forwardFilterPriority, err)
		}
	}
	return nil
}
