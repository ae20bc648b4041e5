//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// escapeTopo: node a is the prisoner (held to 64M of memory and 64 processes), b its
// neighbour; network escape2 is a second network in the same subnet.
const escapeTopo = `name: %s
nodes:
  a: {addresses: {eth1: [10.0.0.%d/24]}, memory: 64M, pids: 64}
  b: {addresses: {eth1: [10.0.0.%d/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
    rate: 10mbit
`

// syscallProbe runs a system call in python3 and exits 1 if it failed with the errno named,
// 0 if it succeeded, 2 if it failed otherwise: a denial for the wrong reason is no denial.
func syscallProbe(errno, call string) string {
	return fmt.Sprintf(`/usr/bin/python3 -c 'import ctypes,errno,sys
l=ctypes.CDLL(None,use_errno=True)
r=l.syscall(%s)
sys.exit(0 if r==0 else 1 if ctypes.get_errno()==errno.%s else 2)'`, call, errno)
}

// TestEscape runs, as root inside a node, the probes a careful operator tries first. Each is
// one row: the shell command, and whether it must succeed (controls: what a router needs) or
// fail; some rows also check the host after. docs/security.md lists the same probes with the
// layer that stops each.
func TestEscape(t *testing.T) {
	e := start(t)
	net1, net2 := "escape", "escape2"
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(escapeTopo, net1, 1, 2)))
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(escapeTopo, net2, 3, 4)))
	info, other := inspect(t, e.state, net1), inspect(t, e.state, net2)
	port := info.link(t, "a:eth1--b:eth1").Endpoints[0].Port
	hostFile := "/usr/local/trellis-escape-" + nonce()
	group := ""
	for _, g := range []string{"/sys/fs/cgroup/pids/trellis/*.", "/sys/fs/cgroup/trellis/*."} {
		if paths, _ := filepath.Glob(g + info.NetID + ".a"); len(paths) == 1 {
			group = paths[0]
		}
	}
	if group == "" {
		t.Fatalf("no cgroup of node a (network id %s)", info.NetID)
	}
	hostValues := map[string]string{}
	for _, f := range []string{"/proc/sys/kernel/panic", "/proc/sys/vm/swappiness", "/proc/sys/fs/file-max", "/proc/sys/kernel/ctrl-alt-del", group + "/pids.max"} {
		hostValues[f] = readTrim(f)
	}

	host := hostAddr(t)
	probes := []struct {
		name, cmd string
		allowed   bool
	}{
		// Controls: a router's root may do all this in its own namespaces.
		{"net.* sysctl", "sysctl -w net.ipv4.conf.eth1.rp_filter=0", true},
		{"netns VRF", "ip netns add vrf1 && ip netns exec vrf1 ip link set lo up && ip netns del vrf1", true},
		{"nftables", "nft add table inet t && nft delete table inet t", true},
		{"tcpdump", "timeout 3 tcpdump -c1 -ni eth1 icmp & sleep 1; ping -c1 -W1 10.0.0.2 >/dev/null; wait $!", true},
		{"write its /etc", "echo x > /etc/trellis-probe && cat /etc/trellis-probe", true},
		// Host-wide kernel settings: checked against the host's user namespace.
		{"kernel.* sysctl", "echo 7 > /proc/sys/kernel/panic", false},
		{"vm.* sysctl", "echo 17 > /proc/sys/vm/swappiness", false},
		{"fs.* sysctl", "echo 1000 > /proc/sys/fs/file-max", false},
		{"kernel.* with /proc/sys unmounted", "umount /proc/sys/net; umount /proc/sys; echo 7 > /proc/sys/kernel/panic", false},
		// Host files.
		{"read /etc/shadow", "cat /etc/shadow", false},
		{"read a closed host directory", "ls /root", false},
		{"read /etc/shadow under its /etc", "umount /etc", false},
		{"read the copies of /etc", "ls /run/trellis", false},
		{"change the init program", "echo x >> /proc/1/exe || truncate -s 0 /proc/1/exe", false},
		{"write the host file system", "touch /usr/trellis-probe", false},
		{"remount the host read-write", "mount -o remount,rw /", false},
		{"unmount a private directory", "umount /tmp", false},
		{"mount over a host path (own view only)", "mount -t tmpfs none /usr/local && touch " + hostFile, true},
		// Devices, modules, BPF, reboot.
		{"mknod a block device", "mknod /tmp/sda b 8 0", false},
		{"load a kernel module", syscallProbe("EPERM", "313, 0, b'', 0"), false},
		{"load a BPF program", syscallProbe("EPERM", "321, 5, ctypes.create_string_buffer(128), 128"), false},
		{"reboot (ctrl-alt-del on)", syscallProbe("EINVAL", "169, 0xfee1dead, 672274793, 0x89abcdef, 0"), false},
		{"sysrq", "echo h > /proc/sysrq-trigger", false},
		// Other processes and namespaces.
		{"see host processes", fmt.Sprintf("test $(ls /proc | grep -c '^[0-9]') -gt 20 || kill -0 %d", os.Getpid()), false},
		{"signal node b's init", fmt.Sprintf("kill -0 %d", info.node(t, "b").PID), false},
		{"setns into another network", fmt.Sprintf("nsenter --net=/proc/%d/ns/net true", other.node(t, "b").PID), false},
		// The substrate: ports, shapers, programs, cgroups.
		{"see its port", "ip link show " + port, false},
		{"remove its shaper", "tc qdisc del dev " + port + " root", false},
		{"raise its pids limit", "umount /sys; echo max > " + group + "/pids.max", false},
		{"raise its pids limit through a cgroup mount of its own", "mkdir -p /tmp/cg && mount -t cgroup -o pids none /tmp/cg && echo max > /tmp/cg/pids.max", false},
		// Limits.
		{"exceed its pids limit", "sh -c 'for i in $(seq 80); do sleep 20 & done; wait'; r=$?; kill -9 -1; exit $r", false},
		{"exceed its memory limit", "/usr/bin/python3 -c 'x = bytearray(256 << 20); print(len(x))'", false},
		{"fill the host disk through /tmp", "dd if=/dev/zero of=/tmp/fill bs=1M count=256; r=$?; rm -f /tmp/fill; exit $r", false},
		{"fill the host disk through /var/log", "head -c 256M /dev/zero > /var/log/fill; r=$?; rm -f /var/log/fill; exit $r", false},
		// Other networks and the substrate's addresses.
		{"reach another network in the same subnet", "ping -c1 -W1 10.0.0.3", false},
		{"reach its neighbour (control)", "ping -c1 -W1 10.0.0.2", true},
		{"reach the host", "ip route add default dev eth1 && ping -c1 -W1 " + host, false},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "reach the host" && host == "" {
				testkit.Skip(t, "the host has no IPv4 address outside 127.0.0.0/8: give it one to test that a node cannot reach it")
			}
			out, errOut, err := execIn(t, e.state, net1, "a", "sh", "-c", p.cmd)
			if (err == nil) != p.allowed {
				t.Errorf("%q: exit %d, want allowed=%v\nstdout: %s\nstderr: %s", p.cmd, exitCode(err), p.allowed, out, errOut)
			}
			if err != nil && exitCode(err) == 2 && strings.Contains(p.cmd, "python3") {
				t.Errorf("%q: failed, but not with the errno of a denial", p.cmd)
			}
		})
	}

	for f, v := range hostValues {
		if got := readTrim(f); got != v {
			t.Errorf("host %s changed: %q -> %q", f, v, got)
		}
	}
	if _, err := os.Stat(hostFile); err == nil {
		os.Remove(hostFile)
		t.Errorf("%s, made in a node's own mount, appeared on the host", hostFile)
	}
	var raw struct {
		Nodes []struct {
			Name  string
			Usage struct {
				Processes int64 `json:"processes"`
				OOMKills  int64 `json:"oom_kills"`
			}
		}
	}
	if err := json.Unmarshal([]byte(mustTrellis(t, e.state, "inspect", net1, "--json")), &raw); err != nil {
		t.Fatal(err)
	}
	for _, n := range raw.Nodes {
		if n.Name == "a" && (n.Usage.OOMKills < 1 || n.Usage.Processes > 64) {
			t.Errorf("node a: %d OOM kills, %d processes; want at least 1 kill, at most 64 processes", n.Usage.OOMKills, n.Usage.Processes)
		}
	}
	ping(t, e.state, net1, "b", "10.0.0.1") // the prisoner's neighbour is unharmed, and so is a
	if ranges, _ := filepath.Glob(filepath.Join(e.state, "uids", "*")); len(ranges) != 2 {
		t.Errorf("uid ranges recorded while two networks are up: %v, want 2", ranges)
	}
	mustTrellis(t, e.state, "down", net1, net2)
	if ranges, _ := filepath.Glob(filepath.Join(e.state, "uids", "*")); len(ranges) != 0 {
		t.Errorf("uid ranges still recorded after down: %v", ranges)
	}
	e.assertClean()
}

func readTrim(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

// hostAddr is an address of the host's own: on its default route's device, else on any device;
// "" if the host has no IPv4 address outside 127.0.0.0/8.
func hostAddr(t *testing.T) string {
	out, err := os.ReadFile("/proc/net/route")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "00000000" {
			continue
		}
		ifc, err := net.InterfaceByName(f[0])
		if err != nil {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	return ""
}
