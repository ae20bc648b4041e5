package noderuntime

import (
	"encoding/binary"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/trellisnet/trellis/internal/noderuntime/nodeinit"
)

const (
	auditArchX86_64 = 0xc000003e
	auditArchI386   = 0x40000003
	x32Bit          = 0x40000000
	allow           = uint32(unix.SECCOMP_RET_ALLOW)
	eperm           = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys          = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	// personality(2) flags (linux/personality.h)
	addrNoRandomize = 0x0040000
	readImpliesExec = 0x0400000
	perLinux32      = 0x0008
)

// wantDenied are the x86-64 numbers of deniedSyscalls (numbers from x/sys, names from the
// filter's library: a misspelt or missing name shows here).
var wantDenied = map[uintptr]string{
	unix.SYS_KEXEC_LOAD: "kexec_load", unix.SYS_KEXEC_FILE_LOAD: "kexec_file_load",
	unix.SYS_INIT_MODULE: "init_module", unix.SYS_FINIT_MODULE: "finit_module", unix.SYS_DELETE_MODULE: "delete_module",
	unix.SYS_ADD_KEY: "add_key", unix.SYS_REQUEST_KEY: "request_key", unix.SYS_KEYCTL: "keyctl",
	unix.SYS_USERFAULTFD: "userfaultfd", unix.SYS_PERF_EVENT_OPEN: "perf_event_open", unix.SYS_BPF: "bpf",
	unix.SYS_IO_URING_SETUP: "io_uring_setup", unix.SYS_IO_URING_ENTER: "io_uring_enter", unix.SYS_IO_URING_REGISTER: "io_uring_register",
	unix.SYS_OPEN_BY_HANDLE_AT: "open_by_handle_at", unix.SYS_IOPL: "iopl", unix.SYS_IOPERM: "ioperm",
	unix.SYS_SWAPON: "swapon", unix.SYS_SWAPOFF: "swapoff", unix.SYS_ACCT: "acct",
	unix.SYS_QUOTACTL: "quotactl", unix.SYS_QUOTACTL_FD: "quotactl_fd",
	unix.SYS_SETTIMEOFDAY: "settimeofday", unix.SYS_CLOCK_SETTIME: "clock_settime",
	unix.SYS_CLOCK_ADJTIME: "clock_adjtime", unix.SYS_ADJTIMEX: "adjtimex",
	unix.SYS_SYSLOG: "syslog", unix.SYS_LOOKUP_DCOOKIE: "lookup_dcookie", unix.SYS_USELIB: "uselib",
}

// mustWork are system calls that the must-work list (FRR, BIRD, tcpdump, nft, iperf3, ping,
// ip netns) and trellis's own entry into a node make; every call not denied is checked to
// pass too, these are named for the failure message.
var mustWork = map[uintptr]string{
	unix.SYS_UNSHARE: "unshare", unix.SYS_SETNS: "setns", unix.SYS_MOUNT: "mount", unix.SYS_UMOUNT2: "umount2",
	unix.SYS_CLONE: "clone", unix.SYS_CLONE3: "clone3", unix.SYS_EXECVE: "execve", unix.SYS_SETSOCKOPT: "setsockopt",
	unix.SYS_SENDMSG: "sendmsg", unix.SYS_RECVMSG: "recvmsg", unix.SYS_SETUID: "setuid", unix.SYS_SETGROUPS: "setgroups",
	unix.SYS_CAPSET: "capset", unix.SYS_PRCTL: "prctl", unix.SYS_IOCTL: "ioctl", unix.SYS_PTRACE: "ptrace",
	unix.SYS_OPEN_TREE: "open_tree", unix.SYS_MOVE_MOUNT: "move_mount", unix.SYS_SECCOMP: "seccomp",
	unix.SYS_SETHOSTNAME: "sethostname", unix.SYS_CLOCK_GETTIME: "clock_gettime", unix.SYS_GETTIMEOFDAY: "gettimeofday",
}

// run evaluates the filter for one call. seccomp_data is native-endian (nr at 0, arch at 4,
// args from 16); x/net/bpf's VM loads words big-endian, so each 32-bit word the filter loads is
// written big-endian where an x86-64 kernel has it.
func run(t *testing.T, vm *bpf.VM, arch uint32, nr uintptr, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], uint32(nr))
	binary.BigEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}

func filterVM(t *testing.T) *bpf.VM {
	prog, err := filterProgram()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog)%8 != 0 {
		t.Fatalf("program of %d bytes", len(prog))
	}
	var raw []bpf.RawInstruction
	for b := prog; len(b) > 0; b = b[8:] {
		raw = append(raw, bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])})
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the program does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// TestFilterCalls checks every x86-64 system call number: the denied ones get EPERM, every
// other one passes (with arguments that do not touch the conditional rules).
func TestFilterCalls(t *testing.T) {
	vm := filterVM(t)
	if len(wantDenied) != len(deniedSyscalls)-3 { // stime, clock_*64 are not x86-64's
		t.Errorf("%d denied calls checked, %d listed", len(wantDenied), len(deniedSyscalls))
	}
	for nr := uintptr(0); nr < 512; nr++ {
		want, why := allow, mustWork[nr]
		if name, ok := wantDenied[nr]; ok {
			want, why = eperm, name
		}
		if nr == unix.SYS_PERSONALITY {
			want, why = eperm, "personality(PER_BSD)"
		}
		if got := run(t, vm, auditArchX86_64, nr, 6); got != want {
			t.Errorf("call %d %s: filter returns %#x, want %#x", nr, why, got, want)
		}
	}
}

func TestFilterArguments(t *testing.T) {
	vm := filterVM(t)
	cases := []struct {
		name string
		nr   uintptr
		arg  uint64
		want uint32
	}{
		{"personality(PER_LINUX)", unix.SYS_PERSONALITY, 0, allow},
		{"personality(0xffffffff) (query)", unix.SYS_PERSONALITY, 0xffffffff, allow},
		{"personality(-1) (query, as an unsigned long)", unix.SYS_PERSONALITY, ^uint64(0), allow},
		{"personality(ADDR_NO_RANDOMIZE)", unix.SYS_PERSONALITY, addrNoRandomize, eperm},
		{"personality(READ_IMPLIES_EXEC)", unix.SYS_PERSONALITY, readImpliesExec, eperm},
		{"personality(PER_LINUX32)", unix.SYS_PERSONALITY, perLinux32, eperm},
		{"personality(1<<32|ADDR_NO_RANDOMIZE) (high word set)", unix.SYS_PERSONALITY, 1<<32 | addrNoRandomize, eperm},
		{"socket(1<<32|AF_ALG) (high word set)", unix.SYS_SOCKET, 1<<32 | unix.AF_ALG, eperm},
		{"socket(AF_ALG)", unix.SYS_SOCKET, unix.AF_ALG, eperm},
		{"socket(AF_VSOCK)", unix.SYS_SOCKET, unix.AF_VSOCK, eperm},
	}
	for _, af := range []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK, unix.AF_PACKET, unix.AF_KEY} {
		cases = append(cases, struct {
			name string
			nr   uintptr
			arg  uint64
			want uint32
		}{"socket of family " + strconv.FormatUint(af, 10), unix.SYS_SOCKET, af, allow})
	}
	for _, c := range cases {
		if got := run(t, vm, auditArchX86_64, c.nr, c.arg); got != c.want {
			t.Errorf("%s: filter returns %#x, want %#x", c.name, got, c.want)
		}
	}
}

// TestFilterArchitectures: i386 calls (int 0x80) and x32 calls get ENOSYS, whatever the number:
// their numbers are not x86-64's, and would pass a deny list written for x86-64.
func TestFilterArchitectures(t *testing.T) {
	vm := filterVM(t)
	for _, nr := range []uintptr{0, 20 /* i386 getpid */, unix.SYS_GETPID, unix.SYS_KEXEC_LOAD, 283 /* i386 kexec_load */, 400} {
		if got := run(t, vm, auditArchI386, nr); got != enosys {
			t.Errorf("i386 call %d: filter returns %#x, want ENOSYS", nr, got)
		}
		if got := run(t, vm, auditArchX86_64, nr|x32Bit); got != enosys {
			t.Errorf("x32 call %d: filter returns %#x, want ENOSYS", nr, got)
		}
	}
}

// TestFilterInstalled installs the filter in a child process (this test binary again) and
// makes real calls: the kernel runs the program as package node hands it over.
func TestFilterInstalled(t *testing.T) {
	if os.Getenv("TRELLIS_SECCOMP_CHILD") == "1" {
		filterChild()
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestFilterInstalled$")
	cmd.Env = append(os.Environ(), "TRELLIS_SECCOMP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "filtered ok") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// filterChild runs in the child of TestFilterInstalled: it prints "filtered ok" if every call
// had the outcome it should.
func filterChild() {
	if os.Geteuid() != 0 && unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != nil { // as trellis: root, without it
		panic("no_new_privs")
	}
	if err := installFilter(); err != nil {
		panic(err)
	}
	var bad []string
	call := func(name string, want unix.Errno, nr uintptr, args ...uintptr) {
		a := make([]uintptr, 6)
		copy(a, args)
		_, _, errno := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if errno != want {
			bad = append(bad, name+": "+errno.Error())
		}
	}
	desc := []byte("trellis-probe\x00")
	call("keyctl(GET_KEYRING_ID)", unix.EPERM, unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2), 0)
	call("add_key", unix.EPERM, unix.SYS_ADD_KEY, uintptr(unsafe.Pointer(&[]byte("user\x00")[0])), uintptr(unsafe.Pointer(&desc[0])), 0, 0, ^uintptr(1))
	call("io_uring_setup", unix.EPERM, unix.SYS_IO_URING_SETUP, 1, 0)
	call("personality(ADDR_NO_RANDOMIZE)", unix.EPERM, unix.SYS_PERSONALITY, addrNoRandomize)
	call("personality(query)", 0, unix.SYS_PERSONALITY, 0xffffffff)
	call("getpid", 0, unix.SYS_GETPID)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil || !strings.Contains(string(status), "Seccomp:\t2\n") {
		bad = append(bad, "status: no Seccomp: 2")
	}
	if len(bad) > 0 {
		os.Stdout.WriteString(strings.Join(bad, "\n") + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("filtered ok\n")
	os.Exit(0)
}

// TestInstallFilterRefusesBadPrograms: a program that is not whole instructions is refused.
func TestInstallFilterRefusesBadPrograms(t *testing.T) {
	for _, p := range [][]byte{nil, make([]byte, 7)} {
		if err := nodeinit.InstallFilter(p); err == nil {
			t.Errorf("%d bytes: installed", len(p))
		}
	}
}
