// Package dataplane owns the eBPF programs of the substrate: the small
// kernel programs that move frames between the ports (the host-side veth ends
// of node interfaces) of Trellis's virtual networks, and the Go code that
// loads them and attaches them to those ports.
//
// Every program is a classic tc filter by default (cls_bpf in direct-action
// mode under a clsact qdisc); with the hook set to tcx (Linux 6.6 and later),
// the shortbridge and impairment programs go on the port's tcx ingress
// instead, which forwards faster and deploys slower; see hook.go. None is attached through a bpf link or pinned
// on bpffs: a tcx program attached with BPF_PROG_ATTACH, like a tc filter,
// lives exactly as long as its device, so deleting a port removes its
// programs too, and nothing outlives the port or needs separate cleanup.
package dataplane

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Identity of the shortbridge filter on a port's tc ingress. The handle and
// priority are fixed so that attaching again replaces the filter in place
// (netlink.FilterReplace matches on parent, priority, protocol and handle)
// instead of stacking a second one; the name lets anyone recognise it
// (`tc filter show dev PORT ingress` prints it). The priority leaves room
// for the impairment filter in front of it (see forward.go).
const (
	shortbridgeFilterName     = "trellis_sb"
	shortbridgeFilterHandle   = 0x5b
	shortbridgeFilterPriority = forwardFilterPriority
)

var (
	shortbridgeOnce    sync.Once
	shortbridgeSpec    *ebpf.CollectionSpec
	shortbridgeSpecErr error
	// shortbridgeSpecMu guards the copying of shortbridgeSpec. Copy only
	// reads, but holding a lock for it costs nothing next to the load and
	// spares us relying on the library's internals being race-free.
	shortbridgeSpecMu sync.Mutex
)

// loadShortbridgeSpec parses the embedded ELF once per process.
func loadShortbridgeSpec() (*ebpf.CollectionSpec, error) {
	shortbridgeOnce.Do(func() {
		// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; on
		// newer ones (memcg accounting) this is a no-op.
		if err := rlimit.RemoveMemlock(); err != nil {
			shortbridgeSpecErr = fmt.Errorf("dataplane: lifting memlock rlimit: %w", err)
			return
		}
		shortbridgeSpec, shortbridgeSpecErr = loadShortbridge()
	})
	return shortbridgeSpec, shortbridgeSpecErr
}

// newShortbridgeProgram loads a shortbridge program specialised for one port.
// The caller owns (and must close) the returned program.
func newShortbridgeProgram(peerIfindex int, deliverPeer bool) (*ebpf.Program, error) {
	base, err := loadShortbridgeSpec()
	if err != nil {
		return nil, err
	}

	shortbridgeSpecMu.Lock()
	spec := base.Copy()
	shortbridgeSpecMu.Unlock()

	var specs shortbridgeSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("assigning shortbridge spec: %w", err)
	}
	if err := specs.PeerIfindex.Set(uint32(peerIfindex)); err != nil {
		return nil, fmt.Errorf("setting peer_ifindex: %w", err)
	}
	var dp uint8
	if deliverPeer {
		dp = 1
	}
	if err := specs.DeliverPeer.Set(dp); err != nil {
		return nil, fmt.Errorf("setting deliver_peer: %w", err)
	}

	var objs shortbridgeObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("loading shortbridge program: %+v", verr)
		}
		return nil, fmt.Errorf("loading shortbridge program: %w", err)
	}
	// Only the program is handed out: the .rodata map holding the constants
	// is referenced by the program itself and lives as long as it does.
	return objs.Shortbridge, nil
}

// AttachShortbridge loads a shortbridge program whose target is peerIfindex and attaches it
// to the ingress of the port with index portIfindex, on the hook c chooses (tcx, or a tc
// filter under a clsact qdisc, added if there is none; under clsact if the port's impairment
// or delay is there: portHook), replacing the port's forwarding
// program (shortbridge, EGRE encapsulation or LAN) wherever it is. deliverPeer selects
// bpf_redirect_peer.
//
// With deliverPeer false every frame is sent out of the peer port's egress
// (bpf_redirect), where a qdisc such as a rate shaper applies; with it true
// frames go straight into the peer port's veth partner inside the node's
// namespace (bpf_redirect_peer), skipping the peer port's egress entirely.
//
// It is safe to call concurrently, for different ports or for the same one
// (the last call wins).
func AttachShortbridge(c Config, portIfindex, peerIfindex int, deliverPeer bool) error {
	hook, err := portHook(c, portIfindex)
	if err != nil {
		return err
	}
	return AttachShortbridgeOn(hook, portIfindex, peerIfindex, deliverPeer)
}

// AttachShortbridgeOn is AttachShortbridge on the given hook (the bench measures the clsact
// one on a kernel that has tcx). HookTCX on a kernel without tcx fails.
func AttachShortbridgeOn(hook Hook, portIfindex, peerIfindex int, deliverPeer bool) error {
	if portIfindex <= 0 || portIfindex > int(^uint32(0)>>1) {
		return fmt.Errorf("dataplane: attach shortbridge: invalid port ifindex %d", portIfindex)
	}
	if peerIfindex <= 0 || peerIfindex > int(^uint32(0)>>1) {
		return fmt.Errorf("dataplane: attach shortbridge on port %d: invalid peer ifindex %d", portIfindex, peerIfindex)
	}
	attach := attachShortbridge
	if hook == HookTCX {
		attach = attachShortbridgeTCX
	}
	if err := attach(portIfindex, peerIfindex, deliverPeer); err != nil {
		return fmt.Errorf("dataplane: attach shortbridge on port %d (peer %d, %s): %w", portIfindex, peerIfindex, hook, err)
	}
	return nil
}

// attachShortbridgeTCX puts the shortbridge on the port's tcx ingress, in the place of the
// one there or at the tail (after an impairment), then takes a forwarding filter off the
// port's clsact: until then the tcx program runs first, so no frame finds the port without a
// forwarding program, and none meets two.
func attachShortbridgeTCX(portIfindex, peerIfindex int, deliverPeer bool) error {
	prog, err := newShortbridgeProgram(peerIfindex, deliverPeer)
	if err != nil {
		return err
	}
	defer prog.Close() // the attachment holds its own reference
	if err := attachTCX(portIfindex, prog, shortbridgeProgName, false); err != nil {
		return err
	}
	return deleteForwardFilters(portIfindex)
}

func attachShortbridge(portIfindex, peerIfindex int, deliverPeer bool) error {
	made, err := addClsact(portIfindex)
	if err != nil {
		return err
	}

	prog, err := newShortbridgeProgram(peerIfindex, deliverPeer)
	if err != nil {
		return err
	}
	// The filter takes its own reference on the program; our fd is no
	// longer needed once the kernel has accepted the filter (or refused it).
	defer prog.Close()

	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: portIfindex,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    shortbridgeFilterHandle,
			Priority:  shortbridgeFilterPriority,
			// Every ethertype: ARP, IPv6 and non-IP frames must cross too.
			Protocol: unix.ETH_P_ALL,
		},
		Fd:           prog.FD(),
		Name:         shortbridgeFilterName,
		DirectAction: true,
	}
	h := &netlink.Handle{}
	if made { // a clsact just made has no filters, none at the old priority
		if err := h.FilterReplace(filter); err != nil {
			return fmt.Errorf("replacing tc ingress filter: %w", err)
		}
	} else if err := replaceForwardFilter(h, filter); err != nil {
		return err
	}
	// A shortbridge left on tcx (attached under another hook choice) would run first.
	return detachTCXNamed(portIfindex, shortbridgeProgName)
}

// ensureClsact adds a clsact qdisc to the port unless it already has one.
func ensureClsact(portIfindex int) error {
	_, err := addClsact(portIfindex)
	return err
}

// addClsact adds a clsact qdisc to the port unless it already has one, and tells whether it
// added it.
func addClsact(portIfindex int) (bool, error) {
	qdisc := &netlink.Clsact{
		QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: portIfindex,
			Handle:    netlink.MakeHandle(0xffff, 0),
			Parent:    netlink.HANDLE_CLSACT,
		},
	}
	// QdiscAdd sends NLM_F_EXCL: EEXIST means a clsact (the only qdisc that
	// can sit at HANDLE_CLSACT with this handle besides "ingress") is
	// already there, possibly added by a concurrent call; that is fine.
	err := netlink.QdiscAdd(qdisc)
	if errors.Is(err, unix.EEXIST) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("adding clsact qdisc: %w", err)
	}
	return true, nil
}

// ShortbridgeAttached reports whether a shortbridge program is on the ingress of the port with
// index portIfindex: on its tcx ingress (recognised by the program's name), or as a tc filter
// (recognised by the filter's name).
func ShortbridgeAttached(portIfindex int) (bool, error) {
	if kernelHasTCX() {
		ps, _, err := tcxIngress(portIfindex, shortbridgeProgName)
		if err != nil {
			return false, fmt.Errorf("dataplane: shortbridge attached on port %d: %w", portIfindex, err)
		}
		closeTCX(ps)
		if len(ps) > 0 {
			return true, nil
		}
	}
	link, err := netlink.LinkByIndex(portIfindex)
	if err != nil {
		return false, fmt.Errorf("dataplane: shortbridge attached on port %d: %w", portIfindex, err)
	}
	filters, err := netdev.Dump(func() ([]netlink.Filter, error) { return netlink.FilterList(link, netlink.HANDLE_MIN_INGRESS) })
	if err != nil {
		return false, fmt.Errorf("dataplane: shortbridge attached on port %d: listing ingress filters: %w", portIfindex, err)
	}
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == shortbridgeFilterName {
			return true, nil
		}
	}
	return false, nil
}
