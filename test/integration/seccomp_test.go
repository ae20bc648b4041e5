//go:build integration

package integration

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seccompTopo: node a records, from an exec: line, its own seccomp status and leaves a daemon
// (which the node's init inherits); b is its neighbour.
const seccompTopo = `name: seccomp
nodes:
  a:
    addresses: {eth1: [10.0.0.1/24]}
    exec:
      - grep -E '^Seccomp(_filters)?:' /proc/self/status > /tmp/exec-line-status
      - sleep 600 >/dev/null 2>&1 &
  b: {addresses: {eth1: [10.0.0.2/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
`

// seccompProbes runs, in python3, each system call the nodes' filter denies (x86-64 numbers),
// with arguments for which the kernel, when it is reached, answers something else than EPERM
// wherever it can (docs/security.md gives the answers without the filter), then calls that
// must pass. It prints one line per call: its name and 0 or the errno.
const seccompProbes = `import ctypes, mmap
l = ctypes.CDLL(None, use_errno=True)
l.syscall.restype = ctypes.c_long
def call(nr, *a):
    ctypes.set_errno(0)
    r = l.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) if isinstance(x, int) else x for x in a])
    return 0 if r >= 0 else ctypes.get_errno()
def buf(n):
    return ctypes.create_string_buffer(n)
def i386_getpid():
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # mov eax, 20 (i386 getpid); int 0x80; ret
    r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
    return 0 if r >= 0 else -r
perf = buf(128)
perf[0:8] = (1).to_bytes(4, "little") + (128).to_bytes(4, "little")  # PERF_TYPE_SOFTWARE, size
perf[40:48] = (0x60).to_bytes(8, "little")  # exclude_kernel, exclude_hv
tv = buf(16)
tv[8:16] = (2000000).to_bytes(8, "little")  # tv_usec out of range
probes = [
    ("kexec_load", lambda: call(246, 0, 0, 0, 0)),
    ("kexec_file_load", lambda: call(320, -1, -1, 0, 0, 0)),
    ("init_module", lambda: call(175, 0, 0, b"")),
    ("finit_module", lambda: call(313, -1, b"", 0)),
    ("delete_module", lambda: call(176, b"trellis_probe", 0)),
    ("add_key", lambda: call(248, b"user", b"trellis-probe", b"x", 1, -2)),
    ("request_key", lambda: call(249, b"user", b"trellis-probe-none", 0, 0)),
    ("keyctl", lambda: call(250, 0, -3, 0)),
    ("userfaultfd", lambda: call(323, 0x80001)),
    ("perf_event_open", lambda: call(298, perf, 0, -1, -1, 0)),
    ("bpf", lambda: call(321, 9999, 0, 0)),
    ("io_uring_setup", lambda: call(425, 1, buf(120))),
    ("io_uring_enter", lambda: call(426, -1, 0, 0, 0, 0, 0)),
    ("io_uring_register", lambda: call(427, -1, 0, 0, 0)),
    ("open_by_handle_at", lambda: call(304, -1, 0, 0)),
    ("iopl", lambda: call(172, 0)),
    ("ioperm", lambda: call(173, 0, 1, 0)),
    ("swapon", lambda: call(167, b"/nonexistent", 0)),
    ("swapoff", lambda: call(168, b"/nonexistent")),
    ("acct", lambda: call(163, 0)),
    ("quotactl", lambda: call(179, 0x800005, b"/nonexistent", 0, buf(8))),
    ("quotactl_fd", lambda: call(443, -1, 0, 0, 0)),
    ("settimeofday", lambda: call(164, tv, 0)),
    ("clock_settime", lambda: call(227, 0x7fff, buf(16))),
    ("clock_adjtime", lambda: call(305, 0, buf(208))),
    ("adjtimex", lambda: call(159, buf(208))),
    ("syslog", lambda: call(103, 10, 0, 0)),
    ("lookup_dcookie", lambda: call(212, 0, 0, 0)),
    ("uselib", lambda: call(134, 0)),
    ("personality(ADDR_NO_RANDOMIZE)", lambda: call(135, 0x40000)),
    ("socket(AF_ALG)", lambda: call(41, 38, 5, 0)),
    ("socket(AF_VSOCK)", lambda: call(41, 40, 1, 0)),
    ("x32 getpid", lambda: call(39 | 0x40000000)),
    ("i386 getpid", i386_getpid),
    ("personality(query)", lambda: call(135, 0xffffffff)),
    ("getpid", lambda: call(39)),
    ("socket(AF_INET)", lambda: call(41, 2, 2, 0)),
]
for name, f in probes:
    print(name, f(), flush=True)
`

// seccompWant is each probe's errno in a node (0: it passes).
var seccompWant = map[string]int{
	"kexec_load": 1, "kexec_file_load": 1, "init_module": 1, "finit_module": 1, "delete_module": 1,
	"add_key": 1, "request_key": 1, "keyctl": 1, "userfaultfd": 1, "perf_event_open": 1, "bpf": 1,
	"io_uring_setup": 1, "io_uring_enter": 1, "io_uring_register": 1,
	"open_by_handle_at": 1, "iopl": 1, "ioperm": 1, "swapon": 1, "swapoff": 1, "acct": 1,
	"quotactl": 1, "quotactl_fd": 1, "settimeofday": 1, "clock_settime": 1, "clock_adjtime": 1,
	"adjtimex": 1, "syslog": 1, "lookup_dcookie": 1, "uselib": 1,
	"personality(ADDR_NO_RANDOMIZE)": 1, "socket(AF_ALG)": 1, "socket(AF_VSOCK)": 1,
	"x32 getpid": 38, "i386 getpid": 38, // ENOSYS: other ABIs
	"personality(query)": 0, "getpid": 0, "socket(AF_INET)": 0,
}

// TestSeccomp checks the nodes' seccomp filter (docs/security.md, "A node's root"): every
// process of a node runs under it (the init, an exec: line, a daemon it left, `trellis exec`),
// each denied call fails with EPERM (other ABIs with ENOSYS), and the must-work list works
// under it: ping, tcpdump capturing a ping, nft, ip netns, iperf3 between two nodes. FRR and
// BIRD run under it in TestFRROSPF and TestOSPFRingConverges (assertFiltered).
func TestSeccomp(t *testing.T) {
	for _, tool := range []string{"/usr/bin/python3", "tcpdump", "nft", "iperf3", "ping", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the seccomp rows (%v): scripts/setup.sh installs it", tool, err)
		}
	}
	e := start(t)
	mustTrellis(t, e.state, "up", writeTopo(t, seccompTopo))

	status := []struct{ name, cmd string }{
		{"the init", "grep -E '^Seccomp(_filters)?:' /proc/1/status"},
		{"an exec: line", "cat /tmp/exec-line-status"},
		{"a daemon of an exec: line, now the init's child", `p=$(pidof sleep); test "$(ps -o ppid= -p $p | tr -d ' ')" = 1 && grep -E '^Seccomp(_filters)?:' /proc/$p/status`},
		{"trellis exec", "grep -E '^Seccomp(_filters)?:' /proc/self/status"},
	}
	for _, s := range status {
		t.Run("filtered/"+s.name, func(t *testing.T) {
			out := mustExec(t, e.state, "seccomp", "a", "sh", "-c", s.cmd)
			if !strings.Contains(out, "Seccomp:\t2\n") || !strings.Contains(out, "Seccomp_filters:\t1\n") {
				t.Errorf("%s: want Seccomp: 2 (filter) and one filter, got:\n%s", s.name, out)
			}
		})
	}

	out := mustExec(t, e.state, "seccomp", "a", "/usr/bin/python3", "-c", seccompProbes)
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if n, err := strconv.Atoi(line[i+1:]); i > 0 && err == nil {
			got[line[:i]] = n
		}
	}
	for _, name := range slices.Sorted(maps.Keys(seccompWant)) {
		want := seccompWant[name]
		t.Run("call/"+name, func(t *testing.T) {
			if n, ok := got[name]; !ok || n != want {
				t.Errorf("%s: errno %d (found: %v), want %d\n%s", name, n, ok, want, out)
			}
		})
	}

	mustWork := []struct{ name, cmd string }{
		{"ping", "ping -c1 -W2 10.0.0.2"},
		{"tcpdump captures a ping", "timeout 10 tcpdump -c1 -lni eth1 icmp > /tmp/cap 2>/dev/null & " +
			"for i in $(seq 40); do ping -c1 -W1 10.0.0.2 >/dev/null; grep -q ICMP /tmp/cap && break; sleep 0.2; done; wait $! && grep ICMP /tmp/cap"},
		{"nft adds a table", "nft add table inet trellis_probe && nft list tables | grep trellis_probe && nft delete table inet trellis_probe"},
		{"ip netns add/exec", "ip netns add vrf1 && ip netns exec vrf1 ip link set lo up && ip netns exec vrf1 ip -o link show lo | grep -q UP && ip netns del vrf1"},
	}
	for _, m := range mustWork {
		t.Run("works/"+m.name, func(t *testing.T) { mustExec(t, e.state, "seccomp", "a", "sh", "-c", m.cmd) })
	}
	t.Run("works/iperf3 between two nodes", func(t *testing.T) {
		srv := startIn(t, e.state, "seccomp", "b", "iperf3", "-s", "-1", "-B", "10.0.0.2")
		var last string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, errOut, err := execIn(t, e.state, "seccomp", "a", "iperf3", "-c", "10.0.0.2", "-t", "1", "-J")
			if err == nil && strings.Contains(out, `"bits_per_second"`) {
				break
			}
			last = fmt.Sprintf("%v\n%s\n%s", err, out, errOut)
			if time.Now().After(deadline) {
				t.Fatalf("iperf3 client never completed: %s", last)
			}
		}
		if err := srv.wait(10 * time.Second); err != nil {
			t.Errorf("iperf3 server: %v\n%s%s", err, srv.stdout, srv.stderr)
		}
	})

	mustTrellis(t, e.state, "down", "seccomp")
	e.assertClean()
}

// assertFiltered checks that the programs named (each must run) of a node run under the nodes'
// seccomp filter.
func assertFiltered(t *testing.T, stateDir, network, node string, programs ...string) {
	t.Helper()
	for _, p := range programs {
		out := mustExec(t, stateDir, network, node, "sh", "-c", "grep '^Seccomp:' /proc/$(pidof -s "+p+")/status")
		if strings.TrimSpace(out) != "Seccomp:\t2" {
			t.Errorf("%s/%s: %s runs without the nodes' seccomp filter: %q", network, node, p, out)
		}
	}
}
