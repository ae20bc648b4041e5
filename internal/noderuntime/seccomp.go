package noderuntime

import (
	"encoding/binary"
	"fmt"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/trellisnet/trellis/internal/noderuntime/nodeinit"
)

// The nodes' seccomp filter (docs/security.md, "The nodes' seccomp filter"): every process of a container
// node runs under it, from the node's init (which installs it once it has set the node up) and
// from JoinMain (every command that enters a node). The rule: a node's processes get EPERM for
// the system calls that act on the whole machine or open kernel interfaces a router never uses,
// and ENOSYS for every ABI but the machine's own; everything else is left to the user
// namespace. It is a deny list, not a container runtime's allow list: a node runs whatever the
// user's router software calls (FRR, BIRD, tcpdump, nft, iperf3, ip netns...), and the user
// namespace already refuses what acts on the host; the filter takes away kernel code that a
// node's root could otherwise reach and needs none of.

// deniedSyscalls get EPERM. Most of them the kernel refuses to a node's root anyway (checked
// against the host's user namespace); the filter refuses them before any of their code runs.
var deniedSyscalls = []string{
	// Loading and replacing the kernel.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	// Kernel keyrings, userfaultfd, perf events and eBPF: large interfaces, the source of many
	// kernel exploits, that a router does not use.
	"add_key", "request_key", "keyctl", "userfaultfd", "perf_event_open", "bpf",
	// io_uring: operations submitted through its rings are never seen by seccomp (the filter
	// could not refuse what they do), and it has been a leading source of kernel exploits;
	// container runtimes' default profiles refuse it too.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// The machine's hardware, files and clocks.
	"open_by_handle_at", "iopl", "ioperm", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"settimeofday", "stime", "clock_settime", "clock_settime64", "clock_adjtime", "clock_adjtime64", "adjtimex",
	"syslog", "lookup_dcookie", "uselib",
}

// allowedPersonalities are the personality(2) arguments a node may pass (others get EPERM):
// the default (PER_LINUX) and the query (0xffffffff). Other personalities change how the
// kernel lays out a process (ADDR_NO_RANDOMIZE turns address randomisation off,
// READ_IMPLIES_EXEC makes memory executable).
var allowedPersonalities = []uint32{0, 0xffffffff}

// deniedSocketDomains get EPERM from socket(2): AF_ALG (the kernel's crypto API, a source of
// kernel vulnerabilities) and AF_VSOCK (host and VM sockets, which reach the machine's VMs
// whatever the network namespace); container runtimes' default profiles refuse both.
var deniedSocketDomains = []uint32{unix.AF_ALG, unix.AF_VSOCK}

const (
	retEPERM  = seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	retENOSYS = seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)
)

// filterProgram returns the nodes' seccomp filter, assembled once per process, as
// nodeinit.InstallFilter takes it.
var filterProgram = sync.OnceValues(func() ([]byte, error) {
	prog, err := buildFilter()
	if err != nil {
		return nil, fmt.Errorf("the nodes' seccomp filter: %w", err)
	}
	return prog, nil
})

// buildFilter assembles the filter for the machine's architecture.
func buildFilter() ([]byte, error) {
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, name := range deniedSyscalls {
		if _, ok := native.SyscallNames[name]; ok { // e.g. iopl is x86's alone
			names = append(names, name)
		}
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{{Names: names, Action: retEPERM}}}
	body, err := policy.Assemble() // the library's: loads the call, x32 calls get ENOSYS, the list EPERM
	if err != nil {
		return nil, err
	}
	// Calls of another ABI (i386's int 0x80 on x86-64, AArch32 on arm64) have other numbers,
	// which the list does not check: ENOSYS for all of them, before anything else.
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(retENOSYS)},
	}
	prog = append(prog, argRule(native, "personality", allowedPersonalities, seccomp.ActionAllow, retEPERM)...)
	prog = append(prog, argRule(native, "socket", deniedSocketDomains, retEPERM, seccomp.ActionAllow)...)
	prog = append(prog, body...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw { // struct sock_filter, in the machine's byte order
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// argRule returns the instructions that decide system call name by its first argument: ret
// onMatch if it is one of values, otherwise ret otherwise; other calls go on to what follows.
// The rules are written here, not with the library's conditions, which compare all 64 bits
// (the kernel reads these arguments as 32-bit ints: a high word set would pass a 64-bit
// comparison) and leave the argument where the next rule expects the call's number.
func argRule(native *arch.Info, name string, values []uint32, onMatch, otherwise seccomp.Action) []bpf.Instruction {
	n := len(values)
	argLow := uint32(16) // seccomp_data.args[0], its low word
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
		argLow += 4 // big-endian
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(native.SyscallNames[name]), SkipTrue: uint8(n + 3)},
		bpf.LoadAbsolute{Off: argLow, Size: 4},
	}
	for i, v := range values {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - i)})
	}
	return append(prog, bpf.RetConstant{Val: uint32(otherwise)}, bpf.RetConstant{Val: uint32(onMatch)})
}

// installFilter installs the nodes' seccomp filter on this process (JoinMain), which then
// executes the command that enters a node: the command inherits it.
func installFilter() error {
	prog, err := filterProgram()
	if err == nil {
		err = nodeinit.InstallFilter(prog)
	}
	return err
}
