package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// impairAt is where a port's impairment program is: on its tcx ingress or under its clsact.
type impairAt struct {
	id     ebpf.ProgramID     // 0: the port has none
	tcx    []tcxProg          // on tcx (the first one counts; more only after a race)
	filter *netlink.BpfFilter // under clsact
}

// findImpairment finds the port's impairment program: on its tcx ingress if the kernel has
// tcx, else (or if it is not there: a port set up under the other hook) as a tc filter.
func findImpairment(h *netlink.Handle, portIfindex int) (*impairAt, error) {
	at := &impairAt{}
	if kernelHasTCX() {
		ps, _, err := tcxIngress(portIfindex, impairProgName)
		if err != nil {
			return nil, err
		}
		if len(ps) > 0 {
			info, err := ps[0].prog.Info()
			if err != nil {
				closeTCX(ps)
				return nil, fmt.Errorf("reading the impairment program: %w", err)
			}
			id, ok := info.ID()
			if !ok {
				closeTCX(ps)
				return nil, errors.New("the kernel does not report program ids")
			}
			at.id, at.tcx = id, ps
			return at, nil
		}
	}
	f, err := findIngressFilter(h, portIfindex, impairFilterName)
	if err != nil {
		return nil, err
	}
	if f != nil {
		at.id, at.filter = ebpf.ProgramID(f.Id), f
	}
	return at, nil
}

// remove takes the impairment program off the port.
func (at *impairAt) remove(h *netlink.Handle, portIfindex int) error {
	if at.filter != nil {
		if err := h.FilterDel(at.filter); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("deleting filter: %w", err)
		}
		return nil
	}
	return detachTCX(portIfindex, at.tcx)
}

// close lets go of the programs opened to find the impairment.
func (at *impairAt) close() { closeTCX(at.tcx) }
