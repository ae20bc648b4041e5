package dataplane

// The way of a delayed port's frames through its delay and back (bpf/delay.c): delay_hold on
// the port's ingress sends the frames the node sends to the hold end of the port's delay pair
// (a veth pair in the substrate), where netem or trellis's delay line holds them; delay_return
// on the pair's return end sends them back into the port, where they go on to the forwarding
// program. Both are attached like the other port programs (tcx where the kernel has it, a tc
// filter under clsact otherwise), never pinned: they go with their devices.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Identity of the delay programs on tc ingress (tcx names, and tc filters' names and handles).
// delay_hold runs at the impairment program's priority: the two work in either order.
const (
	delayHoldName     = "delay_hold"
	delayReturnName   = "delay_return"
	delayFilterHandle = 0x1d
)

var (
	delayOnce    sync.Once
	delaySpec    *ebpf.CollectionSpec
	delaySpecErr error
	delaySpecMu  sync.Mutex
)

// DelayHold says where the hold end keeps the frames.
type DelayHold int

const (
	// HoldEgress: out of the hold end's egress, where netem holds them.
	HoldEgress DelayHold = iota
	// HoldIngress: into the hold end's ingress, where the delay line's socket reads them.
	HoldIngress
)

// AttachDelay sends the frames the node of port portIfindex sends through the delay pair whose
// hold end is holdIfindex and return end returnIfindex, and back into the port. It replaces
// the programs of an earlier call (idempotent), and works in the calling thread's namespace.
// c chooses the hook.
func AttachDelay(c Config, portIfindex, holdIfindex, returnIfindex int, hold DelayHold) error {
	if err := attachDelay(c, portIfindex, holdIfindex, returnIfindex, hold); err != nil {
		return fmt.Errorf("dataplane: attach delay on port %d: %w", portIfindex, err)
	}
	return nil
}

func attachDelay(c Config, portIfindex, holdIfindex, returnIfindex int, hold DelayHold) error {
	for _, i := range []int{portIfindex, holdIfindex, returnIfindex} {
		if i <= 0 || i > int(^uint32(0)>>1) {
			return fmt.Errorf("invalid ifindex %d", i)
		}
	}
	delayOnce.Do(func() { delaySpec, delaySpecErr = loadDelay() })
	if delaySpecErr != nil {
		return delaySpecErr
	}
	delaySpecMu.Lock()
	spec := delaySpec.Copy()
	delaySpecMu.Unlock()
	var specs delaySpecs
	if err := spec.Assign(&specs); err != nil {
		return err
	}
	flags := uint32(0)
	if hold == HoldIngress {
		flags = unix.BPF_F_INGRESS
	}
	for _, v := range []struct {
		s *ebpf.VariableSpec
		v uint32
	}{{specs.HoldIfindex, uint32(holdIfindex)}, {specs.HoldFlags, flags}, {specs.PortIfindex, uint32(portIfindex)}} {
		if err := v.s.Set(v.v); err != nil {
			return err
		}
	}
	var objs delayObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return loadError("delay", err)
	}
	defer objs.Close()
	hook, err := portHook(c, portIfindex)
	if err != nil {
		return err
	}
	// The way back first, so that no frame is held without one.
	if err := attachIngress(hook, returnIfindex, objs.DelayReturn, delayReturnName, false); err != nil {
		return fmt.Errorf("return end: %w", err)
	}
	return attachIngress(hook, portIfindex, objs.DelayHold, delayHoldName, true)
}

// attachIngress attaches prog to the ingress of device ifindex: on tcx (at the head of the list
// if head), or as a tc filter at the impairment program's priority, replacing one of the name.
func attachIngress(hook Hook, ifindex int, prog *ebpf.Program, name string, head bool) error {
	if hook == HookTCX {
		return attachTCX(ifindex, prog, name, head)
	}
	h := &netlink.Handle{}
	if err := ensureClsactOn(h, ifindex); err != nil {
		return err
	}
	if head {
		if err := moveLegacyForwardFilter(h, ifindex); err != nil {
			return err
		}
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: delayFilterHandle, Priority: impairFilterPriority, Protocol: unix.ETH_P_ALL},
		Fd: prog.FD(), Name: "trellis_" + name, DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("replacing tc ingress filter: %w", err)
	}
	return nil
}

// DetachDelay takes delay_hold off the port's ingress, if it is there: its frames go straight
// on again. (The delay pair goes with its devices.)
func DetachDelay(portIfindex int) error {
	if err := detachTCXNamed(portIfindex, delayHoldName); err != nil {
		return fmt.Errorf("dataplane: detach delay from port %d: %w", portIfindex, err)
	}
	h := &netlink.Handle{}
	f, err := findIngressFilter(h, portIfindex, "trellis_"+delayHoldName)
	if err == nil && f != nil {
		err = h.FilterDel(f)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("dataplane: detach delay from port %d: %w", portIfindex, err)
	}
	return nil
}
