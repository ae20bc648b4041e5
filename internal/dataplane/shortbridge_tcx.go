package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
)

// A prototype of a leaner shortbridge hook (issue 16, item 6), measured by the bench's
// shortbridge-tcx setup: the same program on the port's tcx ingress (Linux 6.6) instead of a
// cls_bpf filter under a clsact qdisc. tcx runs the program straight from the receive path,
// without the tc classifier chain (tcf_classify, cls_bpf_classify) around it. It is attached
// with BPF_PROG_ATTACH, without a link, so that, like a tc filter, it lives exactly as long as
// its device. Not used by the connectors: tcx programs run before every clsact filter, so a
// port's impairment filter (forward.go), which must see frames first, would be skipped.

// ErrTCXAttach is returned when a program cannot be put on a port's tcx ingress.
var ErrTCXAttach = errors.New("dataplane: tcx attach")

// AttachShortbridgeTCX moves the shortbridge of the port with index portIfindex from its
// clsact qdisc (removed, and with it every tc filter of the port) to its tcx ingress, with the
// same target: peerIfindex, through bpf_redirect_peer when deliverPeer.
func AttachShortbridgeTCX(portIfindex, peerIfindex int, deliverPeer bool) error {
	prog, err := newShortbridgeProgram(peerIfindex, deliverPeer)
	if err != nil {
		return fmt.Errorf("%w: port %d: %w", ErrTCXAttach, portIfindex, err)
	}
	defer prog.Close() // the attachment holds its own reference
	qdisc := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: portIfindex,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := netlink.QdiscDel(qdisc); err != nil {
		return fmt.Errorf("%w: port %d: removing its clsact qdisc: %w", ErrTCXAttach, portIfindex, err)
	}
	err = link.RawAttachProgram(link.RawAttachProgramOptions{Target: portIfindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return fmt.Errorf("%w: port %d: %w", ErrTCXAttach, portIfindex, err)
	}
	return nil
}
