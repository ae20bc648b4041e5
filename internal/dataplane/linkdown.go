package dataplane

// A direct link (one veth pair between two nodes, no port) is taken down and impaired on the
// nodes' own interfaces: on the tcx ingress of the end that receives, where a frame arrives
// after crossing from the other node's namespace. There a node's root cannot lift it: it has
// no bpf() to see or detach a tcx program (a tc filter under clsact it could delete, so
// direct links use tcx only), and every frame the other node sends arrives there, whether it
// went through that node's qdisc and tc egress or around them (PACKET_QDISC_BYPASS). Crossing
// namespaces scrubs a frame's mark, so the impairment program sees no mark the node set.

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// ErrNoTCX is returned for a direct link's down or impairment on a kernel without tcx.
var ErrNoTCX = errors.New("this kernel has no tcx (Linux 6.6 or later)")

// linkDownProgName is the name of the program that drops every frame of a link taken down.
const linkDownProgName = "linkdown"

// HasTCX tells whether the kernel has tcx, so that a direct link can be taken down and
// impaired without ports (probed once per process).
func HasTCX() bool { return kernelHasTCX() }

// SetLinkDown puts (down) or takes off (!down) a program on the tcx ingress of device
// ifindex that drops every frame arriving there. It is idempotent and works in the calling
// thread's network namespace.
func SetLinkDown(ifindex int, down bool) error {
	if err := setLinkDown(ifindex, down); err != nil {
		return fmt.Errorf("dataplane: link down on device %d: %w", ifindex, err)
	}
	return nil
}

func setLinkDown(ifindex int, down bool) error {
	if !kernelHasTCX() {
		return ErrNoTCX
	}
	old, _, err := tcxIngress(ifindex, linkDownProgName)
	if err != nil {
		return err
	}
	defer closeTCX(old)
	switch {
	case !down:
		return detachTCX(ifindex, old)
	case len(old) > 0:
		return nil
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    linkDownProgName,
		Type:    ebpf.SchedCLS,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // TC_ACT_SHOT
			asm.Return(),
		},
	})
	if err != nil {
		return loadError("link down", err)
	}
	defer prog.Close() // the attachment holds it
	return attachTCX(ifindex, prog, linkDownProgName, true)
}

// LinkIsDown tells whether device ifindex has the program of SetLinkDown, in the calling
// thread's network namespace.
func LinkIsDown(ifindex int) (bool, error) {
	if !kernelHasTCX() {
		return false, nil
	}
	ps, _, err := tcxIngress(ifindex, linkDownProgName)
	if err != nil {
		return false, fmt.Errorf("dataplane: link down on device %d: %w", ifindex, err)
	}
	closeTCX(ps)
	return len(ps) > 0, nil
}

// SetDirectImpairment is SetImpairment on the tcx ingress of a direct link's receiving end,
// whatever hook ports use (Config.Hook): the frames that arrive there are impaired.
func SetDirectImpairment(ifindex int, im Impairment) error {
	if !kernelHasTCX() {
		return fmt.Errorf("dataplane: set impairment on device %d: %w", ifindex, ErrNoTCX)
	}
	if err := setImpairment(ifindex, im, HookTCX); err != nil {
		return fmt.Errorf("dataplane: set impairment on device %d (%+v): %w", ifindex, im, err)
	}
	return nil
}
