//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// bpfByIDProbe asks the kernel, in python3, for a file descriptor of every BPF program, map
// and link with an ID up to maxID (BPF_PROG_GET_FD_BY_ID 13, BPF_MAP_GET_FD_BY_ID 14,
// BPF_LINK_GET_FD_BY_ID 30), then for each object pinned under pins (BPF_OBJ_GET 7). Exit 0
// if any call succeeded, 1 if every one failed with EPERM, 2 if one failed otherwise.
func bpfByIDProbe(maxID int, pins []string) string {
	return fmt.Sprintf(`/usr/bin/python3 -c 'import ctypes,errno,struct,sys
l=ctypes.CDLL(None,use_errno=True)
def call(cmd,attr):
    b=ctypes.create_string_buffer(attr,128)
    r=l.syscall(321,cmd,b,128)
    if r>=0: print("bpf",cmd,"succeeded:",attr); sys.exit(0)
    if ctypes.get_errno()!=errno.EPERM: print("bpf",cmd,"errno",ctypes.get_errno()); sys.exit(2)
for i in range(1,%d):
    for cmd in (13,14,30): call(cmd,struct.pack("=I",i))
for p in %q.split():
    s=ctypes.create_string_buffer(p.encode())
    call(7,struct.pack("=Q",ctypes.addressof(s)))
sys.exit(1)'`, maxID+1, strings.Join(pins, " "))
}

// TestEbpfIsolation: the node's root of a programmable node, and of its neighbour, try to get
// at the program or its tables: every BPF object by ID and every pinned one (bpf() is refused
// to nodes), and the tc filters and qdiscs on their interfaces and on the substrate's port
// (which they cannot see). Each is refused, or touches only the node's own side of the link;
// the program forwards after, with its routes as they were.
func TestEbpfIsolation(t *testing.T) {
	needClang(t)
	e := start(t)
	topoPath, _, _ := copyL3(t)
	mustTrellis(t, e.state, "up", topoPath)
	mac := func(node string) string {
		return strings.ReplaceAll(strings.TrimSpace(mustExec(t, e.state, "ebpf-l3", node, "cat", "/sys/class/net/eth1/address")), ":", "")
	}
	table := func(args ...string) string {
		return mustTrellis(t, e.state, append([]string{"table", "ebpf-l3", "s1"}, args...)...)
	}
	table("routes", "set", "18000000.0a000100", mac("h1")+".0100")
	table("routes", "set", "18000000.0a000200", mac("h2")+".0200")
	ping(t, e.state, "ebpf-l3", "h1", "10.0.2.1")
	routes := table("routes", "dump")

	info := inspect(t, e.state, "ebpf-l3")
	port := info.link(t, "h1:eth1--s1:eth1").Endpoints[1].Port // s1's eth1 in the substrate
	var pins []string
	filepath.WalkDir("/sys/fs/bpf", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			pins = append(pins, p)
		}
		return nil
	})
	probes := []struct {
		name, cmd string
		allowed   bool
	}{
		{"open every BPF object by ID or pin", bpfByIDProbe(maxBPFID(t), pins), false},
		{"see the substrate's port", "ip link show " + port, false},
		{"delete the port's filters", "tc filter del dev " + port + " egress", false},
		{"delete the port's clsact", "tc qdisc del dev " + port + " clsact", false},
		// On its own side of the link a node's root does as it likes; the program is not there.
		{"no program on its own eth1", "! tc filter show dev eth1 egress | grep -q bpf && ! tc filter show dev eth1 ingress | grep -q bpf", true},
		{"replace its own eth1's clsact", "tc qdisc replace dev eth1 clsact && tc filter del dev eth1 egress && tc filter del dev eth1 ingress && tc qdisc del dev eth1 clsact", true},
		{"delete its own eth1's qdiscs", "tc qdisc del dev eth1 root; tc qdisc del dev eth1 ingress; true", true},
	}
	for _, node := range []string{"s1", "h1"} {
		for _, p := range probes {
			t.Run(node+"/"+p.name, func(t *testing.T) {
				out, errOut, err := execIn(t, e.state, "ebpf-l3", node, "sh", "-c", p.cmd)
				if (err == nil) != p.allowed {
					t.Errorf("%q: exit %d, want allowed=%v\nstdout: %s\nstderr: %s", p.cmd, exitCode(err), p.allowed, out, errOut)
				}
				if err != nil && exitCode(err) == 2 && strings.Contains(p.cmd, "python3") {
					t.Errorf("bpf() failed, but not with the EPERM of a denial:\n%s", out)
				}
			})
		}
	}
	out := mustExec(t, e.state, "ebpf-l3", "h1", "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.2.1")
	if !strings.Contains(out, "ttl=63") {
		t.Errorf("after the probes h2's replies do not come through the program (TTL one down):\n%s", out)
	}
	if after := table("routes", "dump"); after != routes {
		t.Errorf("the routes changed under the probes:\nbefore:\n%s\nafter:\n%s", routes, after)
	}
	mustTrellis(t, e.state, "down", "ebpf-l3")
	e.assertClean()
}

// maxBPFID is the highest ID of a BPF program or map on the machine (s1's among them), plus
// a margin for links, whose IDs count apart.
func maxBPFID(t *testing.T) int {
	t.Helper()
	highest := 0
	for id, err := ebpf.ProgramGetNextID(0); err == nil; id, err = ebpf.ProgramGetNextID(id) {
		highest = max(highest, int(id))
	}
	for id, err := ebpf.MapGetNextID(0); err == nil; id, err = ebpf.MapGetNextID(id) {
		highest = max(highest, int(id))
	}
	if highest == 0 {
		t.Fatal("no BPF program or map on the machine, not even s1's")
	}
	return highest + 64
}
