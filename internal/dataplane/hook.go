package dataplane

// Where a port's shortbridge and impairment programs run: the port's tcx ingress (Linux 6.6
// and later) or, on kernels without tcx, a cls_bpf filter under a clsact qdisc.
//
// tcx runs its programs straight from the receive path, in the order bpf_mprog keeps for
// them, without the tc classifier chain (tcf_classify, cls_bpf_classify) around them, and
// needs no qdisc: attaching under clsact costs a qdisc per port, whose creation searches a
// list of every tc block on the machine (flow_indr_dev_setup_offload). tcx programs run
// before every clsact filter of the device. So that a port's impairment still sees a frame
// before its forwarding, the impairment program goes on tcx too, at the head of the list
// (link.Head), and the shortbridge at its tail (link.Tail) or in the place of the one before
// it (link.ReplaceProgram): an impairment added, changed or removed live stays in front.
// The forwarding programs that stay on clsact (EGRE encapsulation, the LAN connector) run
// after every tcx program, so the impairment is in front of them as well.
//
// tcx costs at deploy what it saves per frame: for each program added to a port's list, and
// again when a port with a list is deleted, the kernel swaps the list and waits for an RCU
// grace period (synchronize_rcu) under the RTNL lock (kernel/bpf/tcx.c), about 12 ms per port
// on a loaded 2-core machine against 0.6 ms for a clsact filter: a 1000-node chain came up in
// about 36 s on tcx against 14 to 27 s on clsact. So clsact is the default, and Config.PortHook
// tcx (or auto) trades that time for the forwarding gain (about a tenth more of native's peak).
//
// The programs are attached with BPF_PROG_ATTACH, not as bpf links and not pinned: like a tc
// filter, such a program lives exactly as long as its device, so a crashed trellis leaves
// nothing behind and a restarted one finds its programs again by asking the kernel
// (BPF_PROG_QUERY) and reading their names.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Hook is where a port's shortbridge and impairment programs are attached.
type Hook string

const (
	// HookTCX is the port's tcx ingress (Linux 6.6 and later).
	HookTCX Hook = "tcx"
	// HookClsact is a cls_bpf filter on the ingress of a clsact qdisc on the port.
	HookClsact Hook = "clsact"
)

// HookEnv names the environment variable from which the command line takes Config.PortHook
// (its --port-hook flag's default).
const HookEnv = "TRELLIS_PORT_HOOK"

// Config is how this process attaches its programs to ports, chosen by the caller (the command
// line's flags): the zero Config is the default.
type Config struct {
	// PortHook chooses the hook: "clsact" (the default, also when empty), "tcx", or "auto"
	// (tcx where the kernel has it, clsact elsewhere).
	PortHook string
	// PerFrameRoute makes the encapsulation programs look the underlay route up for every
	// frame, as they did before the template of outer headers (EncapRouteTTL).
	PerFrameRoute bool
}

// Hook returns the hook that c chooses on this kernel.
func (c Config) Hook() (Hook, error) { return chooseHook(c.PortHook, kernelHasTCX()) }

// ErrHook is returned when the hook asked for in Config.PortHook cannot be used.
var ErrHook = errors.New("dataplane: port hook")

// Names of the programs (as the kernel keeps them: the C function's name) by which trellis
// recognises its own on a port's tcx ingress.
const (
	shortbridgeProgName = "shortbridge"
	impairProgName      = "impair"
)

// chooseHook picks the hook for the choice want (Config.PortHook) on a kernel that has tcx or
// not.
func chooseHook(want string, haveTCX bool) (Hook, error) {
	switch want {
	case "", string(HookClsact):
		return HookClsact, nil
	case "auto":
		if haveTCX {
			return HookTCX, nil
		}
		return HookClsact, nil
	case string(HookTCX):
		if !haveTCX {
			return "", fmt.Errorf("%w: tcx (--port-hook, %s), but this kernel has no tcx (Linux 6.6 or later): choose clsact (the default) or auto", ErrHook, HookEnv)
		}
		return HookTCX, nil
	}
	return "", fmt.Errorf("%w: %q (--port-hook, %s) is not tcx, clsact or auto: choose one of those", ErrHook, want, HookEnv)
}

// kernelHasTCX tells whether the kernel has tcx (probed once per process).
var kernelHasTCX = sync.OnceValue(probeTCX)

// probeTCX asks the kernel for the tcx ingress programs of the loopback device (index 1 in
// every network namespace): a kernel without tcx does not know the attach type.
func probeTCX() bool {
	_, err := link.QueryPrograms(link.QueryOptions{Target: 1, Attach: ebpf.AttachTCXIngress})
	return err == nil
}

// tcxProg is a program on a device's tcx ingress, opened.
type tcxProg struct {
	prog *ebpf.Program
	name string
}

// tcxIngress returns the programs on the tcx ingress of device ifindex whose names are in
// names (all of them if names is empty), in the order they run, and the revision of that list
// (for an attach that must not race with another: ExpectedRevision). The caller closes them.
func tcxIngress(ifindex int, names ...string) ([]tcxProg, uint64, error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return nil, 0, fmt.Errorf("listing tcx ingress programs: %w", err)
	}
	var out []tcxProg
	for _, ap := range res.Programs {
		p, err := ebpf.NewProgramFromID(ap.ID)
		if errors.Is(err, os.ErrNotExist) {
			continue // detached and freed since the query
		}
		if err != nil {
			closeTCX(out)
			return nil, 0, fmt.Errorf("opening tcx program %d: %w", ap.ID, err)
		}
		info, err := p.Info()
		if err != nil {
			p.Close()
			closeTCX(out)
			return nil, 0, fmt.Errorf("reading tcx program %d: %w", ap.ID, err)
		}
		if len(names) > 0 && !slices.Contains(names, info.Name) {
			p.Close()
			continue
		}
		out = append(out, tcxProg{prog: p, name: info.Name})
	}
	return out, res.Revision, nil
}

func closeTCX(ps []tcxProg) {
	for _, p := range ps {
		p.prog.Close()
	}
}

// attachTCX puts prog on the tcx ingress of device ifindex, in the place of the first program
// called name already there (the others called name are taken off), or else at the head (head)
// or the tail of the list. It retries when another attach changes the list meanwhile, so two
// concurrent calls leave one program called name, the last one's.
func attachTCX(ifindex int, prog *ebpf.Program, name string, head bool) error {
	for range 8 {
		old, rev, err := tcxIngress(ifindex, name)
		if err != nil {
			return err
		}
		opts := link.RawAttachProgramOptions{Target: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress,
			ExpectedRevision: rev, Anchor: link.Tail()}
		switch {
		case len(old) > 0:
			opts.Anchor = link.ReplaceProgram(old[0].prog)
		case head:
			opts.Anchor = link.Head()
		}
		err = link.RawAttachProgram(opts)
		if errors.Is(err, unix.ESTALE) || (len(old) > 0 && errors.Is(err, unix.ENOENT)) {
			closeTCX(old)
			continue // the list changed since we read it: read it again
		}
		if err == nil && len(old) > 1 {
			err = detachTCX(ifindex, old[1:])
		}
		closeTCX(old)
		if err != nil {
			return fmt.Errorf("attaching to tcx ingress: %w", err)
		}
		return nil
	}
	return fmt.Errorf("attaching to tcx ingress: the list of programs kept changing")
}

// detachTCX takes programs off the tcx ingress of device ifindex; one already gone is fine.
func detachTCX(ifindex int, ps []tcxProg) error {
	for _, p := range ps {
		err := link.RawDetachProgram(link.RawDetachProgramOptions{Target: ifindex, Program: p.prog, Attach: ebpf.AttachTCXIngress})
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("detaching %s from tcx ingress: %w", p.name, err)
		}
	}
	return nil
}

// detachTCXNamed takes the programs called name off the tcx ingress of device ifindex, if the
// kernel has tcx.
func detachTCXNamed(ifindex int, name string) error {
	if !kernelHasTCX() {
		return nil
	}
	ps, _, err := tcxIngress(ifindex, name)
	if err != nil {
		return err
	}
	defer closeTCX(ps)
	return detachTCX(ifindex, ps)
}

// portHook returns the hook for a program added to port ifindex: the one c chooses, unless the
// port's programs that must run in front of it or behind it are on the other hook. tcx runs
// before every clsact filter, so a port whose shortbridge, impairment or delay is on tcx gets
// its impairment there too, and a port whose impairment or delay is under clsact gets its
// shortbridge there: each program keeps its place in front of the forwarding, whatever
// --port-hook the process that set the port up was given.
func portHook(c Config, ifindex int) (Hook, error) {
	hook, err := c.Hook()
	if err != nil || !kernelHasTCX() {
		return hook, err
	}
	if hook == HookClsact {
		ps, _, err := tcxIngress(ifindex, shortbridgeProgName, impairProgName, delayHoldName)
		if err != nil {
			return "", fmt.Errorf("%w: programs of port %d: %w", ErrHook, ifindex, err)
		}
		closeTCX(ps)
		if len(ps) > 0 {
			return HookTCX, nil
		}
		return hook, nil
	}
	filters, err := listFilters(&netlink.Handle{}, ifindex, netlink.HANDLE_MIN_INGRESS)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return hook, nil // no clsact qdisc, so no filter
	}
	if err != nil {
		return "", fmt.Errorf("%w: filters of port %d: %w", ErrHook, ifindex, err)
	}
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && (bf.Name == impairFilterName || bf.Name == delayHoldName) {
			return HookClsact, nil
		}
	}
	return hook, nil
}
