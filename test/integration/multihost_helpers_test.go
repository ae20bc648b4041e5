//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// ---------------------------------------------------------------------------------------------
// Simulated machines
//
// A simulated physical machine is a network namespace mI with an underlay interface eth0
// (198.18.0.I/24), a veth whose other end is a port of a bridge in a namespace of its own (the
// underlay "switch"), as scripts/sim-machines.sh makes them. Trellis runs on machine mI as
// `ip netns exec NS trellis --state-dir DIR_OF_mI ...`: the substrate devices, tunnels and eBPF
// programs it makes are in NS, so the root namespace must be left exactly as it was.

// machines is a set of simulated machines, m1..mN, for one test.
type machines struct {
	t      *testing.T
	n      int
	prefix string   // "tsm" + a nonce: every namespace name of this set starts with it
	ul     string   // the underlay namespace, holding the bridge "ul"
	made   []string // namespaces created so far, in order
	states []string // state directory of m1..mN (index i-1)
	eth0   []string // `tc qdisc show dev eth0` of m1..mN as made, before trellis ran there
	mac    []string // MAC address of each machine's eth0
}

// machinesUp snapshots the host, makes n simulated machines and registers a cleanup that runs
// `down --all` on every machine, checks that every machine holds nothing of trellis any more
// (only lo and eth0, eth0's qdiscs as made, no node process), deletes the namespaces and checks
// that the host is as the snapshot recorded it.
func machinesUp(t *testing.T, n int) *machines {
	t.Helper()
	testkit.RequireTool(t, "ip", "scripts/setup.sh installs iproute2")
	before := snapshot(t)
	m := &machines{t: t, n: n, prefix: "tsm" + nonce()}
	m.ul = m.prefix + "-ul"
	// The state directories are made before the cleanup is registered, so that they are removed
	// only after it (cleanups run last first): it needs them to take the networks down, and
	// the host snapshot needs their ids to tell this test's leftovers from others'.
	for i := 1; i <= n; i++ {
		dir := filepath.Join(t.TempDir(), "state-"+m.name(i))
		registerStateDir(dir)
		m.states = append(m.states, dir)
	}
	t.Cleanup(func() { m.cleanup(before) })

	m.netnsAdd(m.ul)
	mustHostRun(t, "ip", "-n", m.ul, "link", "add", "ul", "type", "bridge")
	mustHostRun(t, "ip", "-n", m.ul, "link", "set", "ul", "up")
	mustHostRun(t, "ip", "-n", m.ul, "link", "set", "lo", "up")
	for i := 1; i <= n; i++ {
		ns := m.ns(i)
		m.netnsAdd(ns)
		mustHostRun(t, "ip", "-n", m.ul, "link", "add", m.name(i), "type", "veth", "peer", "name", "eth0", "netns", ns)
		mustHostRun(t, "ip", "-n", m.ul, "link", "set", m.name(i), "master", "ul", "up")
		mustHostRun(t, "ip", "-n", ns, "addr", "add", m.addr(i)+"/24", "dev", "eth0")
		mustHostRun(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		mustHostRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
		m.eth0 = append(m.eth0, mustHostRun(t, "ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", "eth0"))
		m.mac = append(m.mac, strings.TrimSpace(mustHostRun(t, "ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/address")))
	}
	// Every machine reaches every other over the underlay before trellis runs.
	for i := 2; i <= n; i++ {
		if out, err := hostRun("ip", "netns", "exec", m.ns(1), "ping", "-c", "1", "-W", "2", m.addr(i)); err != nil {
			t.Fatalf("simulated machine m1 cannot reach m%d over the underlay: %v\n%s", i, err, out)
		}
	}
	return m
}

func (m *machines) netnsAdd(name string) {
	m.t.Helper()
	mustHostRun(m.t, "ip", "netns", "add", name)
	m.made = append(m.made, name)
}

// name is machine i's host name in topology files: "m1", "m2", ...
func (m *machines) name(i int) string { return fmt.Sprintf("m%d", i) }

// ns is machine i's network namespace.
func (m *machines) ns(i int) string { return fmt.Sprintf("%s-m%d", m.prefix, i) }

// addr is machine i's underlay address.
func (m *machines) addr(i int) string { return fmt.Sprintf("198.18.0.%d", i) }

// state is machine i's trellis state directory.
func (m *machines) state(i int) string { return m.states[i-1] }

// hostsYAML is a `tunnel:` line (unless tunnel is "") and a `hosts:` section listing the
// machines, for a topology file.
func (m *machines) hostsYAML(tunnel string) string {
	var b strings.Builder
	if tunnel != "" {
		fmt.Fprintf(&b, "tunnel: %s\n", tunnel)
	}
	b.WriteString("hosts:\n")
	for i := 1; i <= m.n; i++ {
		fmt.Fprintf(&b, "  %s: {address: %s}\n", m.name(i), m.addr(i))
	}
	return b.String()
}

// command is trellis run on machine i.
func (m *machines) command(ctx context.Context, i int, args ...string) *exec.Cmd {
	argv := append([]string{"netns", "exec", m.ns(i), trellisBin, "--state-dir", m.state(i)}, args...)
	return exec.CommandContext(ctx, "ip", argv...)
}

// run runs trellis on machine i.
func (m *machines) run(i int, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := m.command(ctx, i, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 10 * time.Second // a daemon left holding the output must not hang the test
	err = cmd.Run()
	return o.String(), e.String(), err
}

// trellis runs trellis on machine i and fails the test unless it succeeds; it returns stdout.
func (m *machines) trellis(t *testing.T, i int, args ...string) string {
	t.Helper()
	out, errOut, err := m.run(i, args...)
	if err != nil {
		t.Fatalf("on m%d: trellis %s: %v\nstdout:\n%s\nstderr:\n%s", i, strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// upAll runs `trellis up path` on every machine, one after another, and checks that each says
// the network is up on that host.
func (m *machines) upAll(t *testing.T, path, network string) {
	t.Helper()
	for i := 1; i <= m.n; i++ {
		out := m.trellis(t, i, "up", path)
		if want := fmt.Sprintf("network %s is up on host %s", network, m.name(i)); !strings.Contains(out, want) {
			t.Errorf("up on m%d said %q, want it to contain %q", i, out, want)
		}
	}
}

// exec runs a command inside a node of machine i (`trellis exec` there).
func (m *machines) exec(i int, network, node string, cmd ...string) (stdout, stderr string, err error) {
	return m.run(i, append([]string{"exec", network, node, "--"}, cmd...)...)
}

// mustExec runs a command inside a node of machine i and fails the test unless it succeeds.
func (m *machines) mustExec(t *testing.T, i int, network, node string, cmd ...string) string {
	t.Helper()
	out, errOut, err := m.exec(i, network, node, cmd...)
	if err != nil {
		t.Fatalf("on m%d, in %s/%s: %s: %v\nstdout:\n%s\nstderr:\n%s", i, network, node, strings.Join(cmd, " "), err, out, errOut)
	}
	return out
}

// start starts a command in a node of machine i in the background (see startIn).
func (m *machines) start(t *testing.T, i int, network, node string, argv ...string) *bgCmd {
	t.Helper()
	cmd := m.command(context.Background(), i, append([]string{"exec", network, node, "--"}, argv...)...)
	return startBg(t, cmd, fmt.Sprintf("m%d %s/%s", i, network, node))
}

// tryPing pings addr from a node of machine i.
func (m *machines) tryPing(i int, network, node, addr string, extra ...string) error {
	args := []string{"ping", "-c", "2", "-i", "0.2", "-W", "2"}
	if strings.Contains(addr, ":") {
		args = append(args, "-6")
	}
	args = append(append(args, extra...), addr)
	out, errOut, err := m.exec(i, network, node, args...)
	if err != nil {
		return fmt.Errorf("on m%d: %s from %s/%s: %v\n%s%s", i, strings.Join(args, " "), network, node, err, out, errOut)
	}
	return nil
}

// ping pings addr from a node of machine i and fails the test if no reply comes.
func (m *machines) ping(t *testing.T, i int, network, node, addr string, extra ...string) {
	t.Helper()
	if err := m.tryPing(i, network, node, addr, extra...); err != nil {
		t.Error(err)
	}
}

// inNS runs a plain command in machine i's namespace (i = 0: the underlay namespace).
func (m *machines) inNS(i int, argv ...string) (string, error) {
	ns := m.ul
	if i > 0 {
		ns = m.ns(i)
	}
	return hostRun(append([]string{"ip", "netns", "exec", ns}, argv...)...)
}

// links lists the names of the links in machine i's namespace.
func (m *machines) links(t *testing.T, i int) []string {
	t.Helper()
	names, err := m.linkList(i)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func (m *machines) linkList(i int) ([]string, error) {
	out, err := m.inNS(i, "ip", "-o", "link", "show")
	if err != nil {
		return nil, fmt.Errorf("ip link on m%d: %v\n%s", i, err, out)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		if at := strings.IndexByte(name, '@'); at >= 0 {
			name = name[:at]
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// stateID returns the id of machine i's state directory ("" before trellis made it).
func (m *machines) stateID(i int) string {
	data, err := os.ReadFile(filepath.Join(m.state(i), "id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// nodeProcs lists the trellis-node processes of machine i's state directory.
func (m *machines) nodeProcs(i int) []string {
	var out []string
	for pid, cmd := range m.nodePIDs(i) {
		out = append(out, fmt.Sprintf("pid %d: %s", pid, cmd))
	}
	sort.Strings(out)
	return out
}

// nodePIDs finds the trellis-node processes of machine i's state directory.
func (m *machines) nodePIDs(i int) map[int]string {
	id := m.stateID(i)
	if id == "" {
		return nil
	}
	out := map[int]string{}
	for pid, p := range testkit.Processes() {
		if len(p.Cmdline) > 1 && p.Cmdline[0] == "trellis-node" && p.Cmdline[1] == id {
			out[pid] = strings.Join(p.Cmdline, " ")
		}
	}
	return out
}

// checkMachineClean reports, with t.Errorf, everything of trellis left on machine i: links other
// than lo and eth0, a change of eth0's qdiscs, tc filters on eth0, node processes, networks in
// its state directory.
func (m *machines) checkMachineClean(t *testing.T, i int) {
	t.Helper()
	if got, err := m.linkList(i); err != nil {
		t.Error(err)
	} else if strings.Join(got, " ") != "eth0 lo" {
		t.Errorf("m%d has links %v after down, want only eth0 and lo", i, got)
	}
	qd, err := m.inNS(i, "tc", "qdisc", "show", "dev", "eth0")
	if err != nil {
		t.Errorf("tc qdisc show dev eth0 on m%d: %v\n%s", i, err, qd)
	} else if qd != m.eth0[i-1] {
		t.Errorf("m%d: eth0's qdiscs after down:\n%swant as before trellis ran:\n%s", i, qd, m.eth0[i-1])
	}
	for _, dir := range []string{"ingress", "egress"} {
		out, err := m.inNS(i, "tc", "filter", "show", "dev", "eth0", dir)
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("m%d: tc filter show dev eth0 %s after down: %v\n%s", i, dir, err, out)
		}
	}
	if procs := m.nodeProcs(i); len(procs) > 0 {
		t.Errorf("m%d: node processes left after down:\n%s", i, strings.Join(procs, "\n"))
	}
	if recs, _ := filepath.Glob(filepath.Join(m.state(i), "networks", "*")); len(recs) != 0 {
		t.Errorf("m%d: the state directory still holds %v", i, recs)
	}
}

// cleanup takes every network down on every machine, checks the machines are clean, deletes
// the namespaces and checks the host.
func (m *machines) cleanup(before *testkit.Host) {
	t := m.t
	made := len(m.mac) // machines made whole, on which trellis may have run
	for i := 1; i <= made; i++ {
		if _, errOut, err := m.run(i, "down", "--all"); err != nil {
			t.Errorf("cleanup: on m%d: trellis down --all: %v\n%s", i, err, errOut)
		}
	}
	for i := 1; i <= made; i++ {
		m.checkMachineClean(t, i)
	}
	for j := len(m.made) - 1; j >= 0; j-- {
		if out, err := hostRun("ip", "netns", "del", m.made[j]); err != nil {
			t.Errorf("cleanup: ip netns del %s: %v\n%s", m.made[j], err, out)
		}
	}
	for _, ns := range m.made {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			t.Errorf("cleanup: namespace %s still exists", ns)
		}
	}
	if out, _ := hostRun("ip", "netns", "list"); strings.Contains(out, m.prefix) {
		t.Errorf("cleanup: ip netns list still shows namespaces of this test:\n%s", out)
	}
	assertClean(t, before)
	// Node processes that survived all this (the test has failed by now) would disturb the
	// tests after this one: end them, by pid.
	for i := 1; i <= made; i++ {
		for pid, cmd := range m.nodePIDs(i) {
			if p, err := os.FindProcess(pid); err == nil && killProcess(p) == nil {
				t.Logf("cleanup: killed leftover node process %d (%s)", pid, cmd)
			}
		}
	}
}

// hostRun runs a command on the host and returns its combined output.
func hostRun(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hostOutput runs a command on the host and returns its standard output and error apart.
func hostOutput(argv ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

func mustHostRun(t testing.TB, argv ...string) string {
	t.Helper()
	out, err := hostRun(argv...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

// startBg starts cmd and returns at once, as startIn does for `trellis exec`.
func startBg(t testing.TB, cmd *exec.Cmd, what string) *bgCmd {
	t.Helper()
	b := &bgCmd{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, lines: make(chan string, 1000), done: make(chan error, 1)}
	cmd.Stderr = b.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	go func() {
		buf := make([]byte, 4096)
		var line []byte
		for {
			n, err := pipe.Read(buf)
			for _, c := range buf[:n] {
				b.stdout.WriteByte(c)
				if c == '\n' {
					select {
					case b.lines <- string(line):
					default:
					}
					line = line[:0]
				} else {
					line = append(line, c)
				}
			}
			if err != nil {
				break
			}
		}
		close(b.lines)
		b.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() }) // harmless once it has exited and been waited for
	return b
}

// ---------------------------------------------------------------------------------------------
// inspect --json of a network over several machines

// mhInfo is `trellis inspect --json` of a network, on one machine.
type mhInfo struct {
	Name   string `json:"name"`
	NetID  string `json:"netid"`
	Host   string `json:"host"`
	Tunnel string `json:"tunnel"`
	Status string `json:"status"`
	Nodes  []struct {
		Name       string `json:"name"`
		PID        int    `json:"pid"`
		Running    bool   `json:"running"`
		Interfaces []struct {
			Name      string   `json:"name"`
			MAC       string   `json:"mac"`
			MTU       int      `json:"mtu"`
			State     string   `json:"state"`
			Addresses []string `json:"addresses"`
		} `json:"interfaces"`
	} `json:"nodes"`
	Links []mhLink `json:"links"`
	// EGRE holds the machine's EGRE decapsulation counters, by their Go field names
	// (dataplane.EGRECounters has no JSON tags): Decapsulated, UnknownKey, WrongSource, Errors.
	EGRE map[string]uint64 `json:"egre"`
}

type mhLink struct {
	Name      string         `json:"name"`
	Connector string         `json:"connector"`
	Rate      string         `json:"rate"`
	MTU       int            `json:"mtu"`
	Bridge    string         `json:"bridge"`
	Endpoints []endpointInfo `json:"endpoints"`
	Tunnels   []struct {
		Host   string `json:"host"`
		Remote string `json:"remote"`
		Key    uint32 `json:"key"`
		Device string `json:"device"`
	} `json:"tunnels"`
}

// inspect runs `trellis inspect NETWORK --json` on machine i.
func (m *machines) inspect(t *testing.T, i int, network string) *mhInfo {
	t.Helper()
	out := m.trellis(t, i, "inspect", network, "--json")
	var info mhInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("on m%d: inspect %s --json: %v\n%s", i, network, err, out)
	}
	return &info
}

// nodes returns the names of the nodes inspect shows.
func (n *mhInfo) nodes() []string {
	var out []string
	for _, nd := range n.Nodes {
		out = append(out, nd.Name)
	}
	sort.Strings(out)
	return out
}

// mac returns the MAC address of a node's interface.
func (n *mhInfo) mac(t *testing.T, node, ifname string) string {
	t.Helper()
	_, mac := n.iface(t, node, ifname)
	return mac
}

// iface returns a node interface's MTU and MAC address.
func (n *mhInfo) iface(t *testing.T, node, ifname string) (mtu int, mac string) {
	t.Helper()
	for _, nd := range n.Nodes {
		if nd.Name != node {
			continue
		}
		for _, i := range nd.Interfaces {
			if i.Name == ifname {
				return i.MTU, i.MAC
			}
		}
	}
	t.Fatalf("inspect of %s on host %s shows no interface %s:%s", n.Name, n.Host, node, ifname)
	return 0, ""
}

func (n *mhInfo) link(t *testing.T, name string) mhLink {
	t.Helper()
	for _, l := range n.Links {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("inspect of %s on host %s shows no link %s", n.Name, n.Host, name)
	return mhLink{}
}

// egre returns an EGRE counter, failing the test if inspect does not show it.
func (n *mhInfo) egre(t *testing.T, field string) uint64 {
	t.Helper()
	v, ok := n.EGRE[field]
	if !ok {
		t.Fatalf("inspect of %s on host %s has no egre.%s (egre: %v)", n.Name, n.Host, field, n.EGRE)
	}
	return v
}

// where inspects a network on every machine and returns the machine of each node.
func (m *machines) where(t *testing.T, network string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i := 1; i <= m.n; i++ {
		for _, nd := range m.inspect(t, i, network).nodes() {
			if j, dup := out[nd]; dup {
				t.Fatalf("node %s is on m%d and m%d", nd, j, i)
			}
			out[nd] = i
		}
	}
	return out
}

// counters returns the endpoint packet counters of a network on every machine, by
// "mI node:ifname rx|tx".
func (m *machines) counters(t *testing.T, network string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for i := 1; i <= m.n; i++ {
		for _, l := range m.inspect(t, i, network).Links {
			for _, ep := range l.Endpoints {
				out[fmt.Sprintf("m%d %s:%s rx", i, ep.Node, ep.Interface)] = ep.RxPackets
				out[fmt.Sprintf("m%d %s:%s tx", i, ep.Node, ep.Interface)] = ep.TxPackets
			}
		}
	}
	return out
}

// waitQuiet waits until a network's counters on every machine stay the same for 3 s.
func (m *machines) waitQuiet(t *testing.T, network string) map[string]uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := m.counters(t, network)
	since := time.Now()
	for time.Since(since) < 3*time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("network %s did not go quiet: %v", network, last)
		}
		time.Sleep(250 * time.Millisecond)
		if c := m.counters(t, network); !mapsEqual(c, last) {
			last, since = c, time.Now()
		}
	}
	return last
}

// ---------------------------------------------------------------------------------------------
// Frames between nodes on different machines

// listenFrame starts recvFrameScript in a node of machine i and returns once it is bound.
func (m *machines) listenFrame(t *testing.T, i int, network, node, ifname string, magic []byte, timeout time.Duration) *frameReceiver {
	t.Helper()
	timeout = time.Duration(float64(timeout) * timeScale()) // as listenFrame's
	bg := m.start(t, i, network, node, "python3", "-c", recvFrameScript, ifname, fmt.Sprint(timeout.Seconds()), hex.EncodeToString(magic))
	where := fmt.Sprintf("m%d %s/%s:%s", i, network, node, ifname)
	if line, ok := bg.waitLine(15 * time.Second); !ok || line != "ready" {
		err := bg.wait(time.Second)
		t.Fatalf("frame receiver in %s did not start (first line %q, %v):\n%s%s", where, line, err, bg.stdout, bg.stderr)
	}
	return &frameReceiver{bg: bg, where: where}
}

// sendFrame sends count ethertype 0x88b5 frames from a node of machine i; it returns the
// source MAC, as hex.
func (m *machines) sendFrame(t *testing.T, i int, network, node, ifname, dstMAC string, payload []byte, count int) string {
	t.Helper()
	out := m.mustExec(t, i, network, node, "python3", "-c", sendFrameRetryScript, ifname, macHex(dstMAC), hex.EncodeToString(payload), fmt.Sprint(count))
	return strings.TrimSpace(out)
}

// sendFrameRetryScript is sendFrameScript, except that a frame the kernel refuses with ENOBUFS
// is sent again (up to 50 times, 10 ms apart). Another workload flooding a CPU's input backlog
// (which every namespace shares) makes a veth refuse frames that way; that is not what these
// tests are about.
const sendFrameRetryScript = `
import errno, socket, sys, time
ifname, dst, payload, count = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
src = s.getsockname()[4]
frame = dst + src + b"\x88\xb5" + payload
frame += b"\0" * max(0, 60 - len(frame))
for i in range(count):
    for attempt in range(50):
        try:
            s.send(frame)
            break
        except OSError as e:
            if e.errno != errno.ENOBUFS or attempt == 49:
                raise
            time.sleep(0.01)
    time.sleep(0.05)
print(src.hex())
`

// mhEndpoint is a node interface on a machine.
type mhEndpoint struct {
	machine int
	node    string
	ifname  string
}

func (e mhEndpoint) String() string { return fmt.Sprintf("m%d %s:%s", e.machine, e.node, e.ifname) }

// checkFrameCrosses sends a non-IP frame (unicast to the receiver's MAC) and checks that it
// arrives whole.
func (m *machines) checkFrameCrosses(t *testing.T, network string, from, to mhEndpoint) {
	t.Helper()
	src := m.inspect(t, from.machine, network).mac(t, from.node, from.ifname)
	dst := m.inspect(t, to.machine, network).mac(t, to.node, to.ifname)
	payload := []byte("trellis-it-" + nonce() + "-" + from.node + "-to-" + to.node)
	r := m.listenFrame(t, to.machine, network, to.node, to.ifname, payload, 5*time.Second)
	if sent := m.sendFrame(t, from.machine, network, from.node, from.ifname, dst, payload, 3); sent != macHex(src) {
		t.Errorf("the sender's socket has MAC %s, inspect says %s", sent, src)
	}
	f := r.result(t)
	if f == nil {
		t.Fatalf("no ethertype %#04x frame from %v reached %v", frameEtherType, from, to)
	}
	if f.Src != macHex(src) || f.Dst != macHex(dst) {
		t.Errorf("frame from %v to %v arrived with src %s dst %s, want src %s dst %s", from, to, f.Src, f.Dst, macHex(src), macHex(dst))
	}
	got, _ := hex.DecodeString(f.Payload)
	if !bytes.HasPrefix(got, payload) || strings.Trim(string(got[len(payload):]), "\x00") != "" {
		t.Errorf("frame payload %q, want %q (and zero padding)", got, payload)
	}
}

// checkARP flushes a node's neighbour table, pings addr, and checks that the MAC of the
// interface owning addr (to) was learnt.
func (m *machines) checkARP(t *testing.T, network string, from mhEndpoint, addr string, to mhEndpoint) {
	t.Helper()
	m.mustExec(t, from.machine, network, from.node, "ip", "neigh", "flush", "dev", from.ifname)
	m.ping(t, from.machine, network, from.node, addr)
	want := strings.ToLower(m.inspect(t, to.machine, network).mac(t, to.node, to.ifname))
	out := m.mustExec(t, from.machine, network, from.node, "ip", "-4", "neigh", "show", "dev", from.ifname)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == addr && f[1] == "lladdr" && strings.ToLower(f[2]) == want {
			return
		}
	}
	t.Errorf("no neighbour entry %s lladdr %s in %v after a ping; ip neigh:\n%s", addr, want, from, out)
}

var rttRE = regexp.MustCompile(`rtt min/avg/max/mdev = ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms`)

// rtt pings addr count times from a node and returns min, avg and max in milliseconds.
func (m *machines) rtt(t *testing.T, i int, network, node, addr string, count int) (min, avg, max float64) {
	t.Helper()
	out := m.mustExec(t, i, network, node, "ping", "-q", "-c", fmt.Sprint(count), "-i", "0.02", "-W", "2", addr)
	s := rttRE.FindStringSubmatch(out)
	if s == nil {
		t.Fatalf("no rtt line in ping output:\n%s", out)
	}
	min, _ = strconv.ParseFloat(s[1], 64)
	avg, _ = strconv.ParseFloat(s[2], 64)
	max, _ = strconv.ParseFloat(s[3], 64)
	return min, avg, max
}

// ---------------------------------------------------------------------------------------------
// The underlay: capturing and injecting EGRE packets

// captureGREScript captures, on one interface, every IPv4 frame of protocol 47 (GRE) in both
// directions and prints each as "DIRECTION HEX" (DIRECTION: the AF_PACKET packet type, 4 =
// outgoing), until its standard input is closed. It prints "ready" once bound, "end" last.
// Argument: IFNAME.
const captureGREScript = `
import select, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
print("ready", flush=True)
def take():
    data, addr = s.recvfrom(65535)
    if len(data) >= 24 and data[12:14] == b"\x08\x00" and data[23] == 47:
        print(addr[2], data.hex(), flush=True)
while True:
    r, _, _ = select.select([s, sys.stdin], [], [], 120)
    if s in r:
        take()
    if not r or sys.stdin in r:
        s.setblocking(False)
        try:
            while True:
                take()
        except BlockingIOError:
            pass
        break
print("end", flush=True)
`

// sendRawScript sends raw frames out of an interface. Arguments: IFNAME, then HEX:COUNT for
// each frame, sent COUNT times, 20 ms apart (a frame refused with ENOBUFS is sent again, as in
// sendFrameRetryScript).
const sendRawScript = `
import errno, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for spec in sys.argv[2:]:
    frame, count = spec.split(":")
    for i in range(int(count)):
        for attempt in range(50):
            try:
                s.send(bytes.fromhex(frame))
                break
            except OSError as e:
                if e.errno != errno.ENOBUFS or attempt == 49:
                    raise
                time.sleep(0.01)
        time.sleep(0.02)
`

// backlogDrops is the number of packets the kernel dropped because a CPU's input backlog was
// full (second column of /proc/net/softnet_stat, summed): a sign of another workload flooding
// the machine, which can make a test's own packets disappear.
func backlogDrops() uint64 {
	data, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0
	}
	var sum uint64
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			v, _ := strconv.ParseUint(f[1], 16, 64)
			sum += v
		}
	}
	return sum
}

// greCapture is captureGREScript running in a namespace.
type greCapture struct {
	bg    *bgCmd
	stdin io.WriteCloser
	where string
}

// captureGRE starts capturing GRE on interface ifname of machine i (0: the underlay namespace).
func (m *machines) captureGRE(t *testing.T, i int, ifname string) *greCapture {
	t.Helper()
	ns := m.ul
	if i > 0 {
		ns = m.ns(i)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "python3", "-c", captureGREScript, ifname)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	where := ns + ":" + ifname
	bg := startBg(t, cmd, "capture on "+where)
	if line, ok := bg.waitLine(15 * time.Second); !ok || line != "ready" {
		stdin.Close()
		err := bg.wait(5 * time.Second)
		t.Fatalf("capture on %s did not start (first line %q, %v):\n%s%s", where, line, err, bg.stdout, bg.stderr)
	}
	return &greCapture{bg: bg, stdin: stdin, where: where}
}

// capturedFrame is one frame a capture saw.
type capturedFrame struct {
	outgoing bool
	data     []byte
}

// stop ends the capture and returns the frames it saw.
func (c *greCapture) stop(t *testing.T) []capturedFrame {
	t.Helper()
	c.stdin.Close()
	if err := c.bg.wait(30 * time.Second); err != nil {
		t.Fatalf("capture on %s: %v\n%s", c.where, err, c.bg.stderr)
	}
	var out []capturedFrame
	ended := false
	for _, line := range strings.Split(strings.TrimSpace(c.bg.stdout.String()), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && (f[0] == "ready" || f[0] == "end"):
			ended = ended || f[0] == "end"
		case len(f) == 2:
			data, err := hex.DecodeString(f[1])
			if err != nil {
				t.Fatalf("capture on %s printed %q: %v", c.where, line, err)
			}
			out = append(out, capturedFrame{outgoing: f[0] == "4", data: data})
		default:
			t.Fatalf("capture on %s printed %q", c.where, line)
		}
	}
	if !ended {
		t.Fatalf("capture on %s did not end cleanly:\n%s%s", c.where, c.bg.stdout, c.bg.stderr)
	}
	return out
}

// writePcap writes frames as a classic pcap file (link type Ethernet) for other tools.
func writePcap(t *testing.T, path string, frames []capturedFrame) {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	hdr := make([]byte, 24)
	le.PutUint32(hdr[0:], 0xa1b2c3d4)
	le.PutUint16(hdr[4:], 2)
	le.PutUint16(hdr[6:], 4)
	le.PutUint32(hdr[16:], 65535)
	le.PutUint32(hdr[20:], 1) // LINKTYPE_ETHERNET
	b.Write(hdr)
	base := time.Now()
	for i, f := range frames {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		rec := make([]byte, 16)
		le.PutUint32(rec[0:], uint32(ts.Unix()))
		le.PutUint32(rec[4:], uint32(ts.Nanosecond()/1000))
		le.PutUint32(rec[8:], uint32(len(f.data)))
		le.PutUint32(rec[12:], uint32(len(f.data)))
		b.Write(rec)
		b.Write(f.data)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// egrePacket is an EGRE packet decoded byte by byte.
type egrePacket struct {
	outerDst, outerSrc net.HardwareAddr
	outerType          uint16
	verIHL, ttl, proto byte
	totLen, fragOff    uint16
	checksumOK         bool
	src, dst           netip.Addr
	greFlags, greProto uint16
	key                uint32
	inner              []byte // the inner Ethernet frame
}

func (p *egrePacket) innerDst() net.HardwareAddr { return net.HardwareAddr(p.inner[0:6]) }
func (p *egrePacket) innerSrc() net.HardwareAddr { return net.HardwareAddr(p.inner[6:12]) }
func (p *egrePacket) innerType() uint16          { return binary.BigEndian.Uint16(p.inner[12:14]) }

// decodeEGRE decodes an outer Ethernet + IPv4 + GRE-with-key frame; it fails if the frame is
// too short for that.
func decodeEGRE(frame []byte) (*egrePacket, error) {
	if len(frame) < 14+20+8+14 {
		return nil, fmt.Errorf("frame of %d bytes is too short for EGRE", len(frame))
	}
	be := binary.BigEndian
	p := &egrePacket{
		outerDst:  net.HardwareAddr(frame[0:6]),
		outerSrc:  net.HardwareAddr(frame[6:12]),
		outerType: be.Uint16(frame[12:14]),
		verIHL:    frame[14],
		totLen:    be.Uint16(frame[16:18]),
		fragOff:   be.Uint16(frame[20:22]),
		ttl:       frame[22],
		proto:     frame[23],
		src:       netip.AddrFrom4([4]byte(frame[26:30])),
		dst:       netip.AddrFrom4([4]byte(frame[30:34])),
		greFlags:  be.Uint16(frame[34:36]),
		greProto:  be.Uint16(frame[36:38]),
		key:       be.Uint32(frame[38:42]),
	}
	p.checksumOK = ipChecksum(frame[14:34]) == 0
	end := 14 + int(p.totLen)
	if end > len(frame) || end < 42+14 {
		return nil, fmt.Errorf("IPv4 total length %d does not fit the frame of %d bytes", p.totLen, len(frame))
	}
	p.inner = frame[42:end]
	return p, nil
}

// ipChecksum is the Internet checksum of b: 0 over a header whose checksum is right.
func ipChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// egreFrame builds an EGRE packet as a Linux gretap device with a key sends it: outer Ethernet
// (0x0800), IPv4 (IHL 5, DF, TTL 64, protocol 47), GRE (flags 0x2000, protocol 0x6558, key),
// then the inner frame.
func egreFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, key uint32, inner []byte) []byte {
	be := binary.BigEndian
	f := make([]byte, 42, 42+len(inner))
	copy(f[0:], dstMAC)
	copy(f[6:], srcMAC)
	be.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	be.PutUint16(ip[2:], uint16(20+8+len(inner)))
	be.PutUint16(ip[6:], 0x4000)
	ip[8], ip[9] = 64, 47
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	be.PutUint16(ip[10:], ipChecksum(ip))
	be.PutUint16(f[34:], 0x2000)
	be.PutUint16(f[36:], 0x6558)
	be.PutUint32(f[38:], key)
	return append(f, inner...)
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	mac, err := net.ParseMAC(s)
	if err != nil {
		t.Fatalf("MAC %q: %v", s, err)
	}
	return mac
}

// ---------------------------------------------------------------------------------------------
// iperf3 between machines

var tbfDroppedRE = regexp.MustCompile(`qdisc tbf [^\n]*\n Sent \d+ bytes \d+ pkt \(dropped (\d+),`)

// tbfDrops is the number of frames the tbf shapers of every machine dropped so far.
func (m *machines) tbfDrops(t *testing.T) uint64 {
	t.Helper()
	var sum uint64
	for i := 1; i <= m.n; i++ {
		out, err := m.inNS(i, "tc", "-s", "qdisc", "show")
		if err != nil {
			t.Fatalf("tc -s qdisc show on m%d: %v\n%s", i, err, out)
		}
		for _, s := range tbfDroppedRE.FindAllStringSubmatch(out, -1) {
			v, _ := strconv.ParseUint(s[1], 10, 64)
			sum += v
		}
	}
	return sum
}

// iperf runs an iperf3 server on server (machine, node) bound to addr and a client on client
// for duration seconds (reverse: the server sends), and returns the client's JSON report.
func (m *machines) iperf(t *testing.T, network string, client, server mhEndpoint, addr string, duration int, reverse bool) *iperfResult {
	t.Helper()
	srv := m.start(t, server.machine, network, server.node, "iperf3", "-s", "-1", "-B", addr)
	args := []string{"iperf3", "-c", addr, "-t", fmt.Sprint(duration), "-O", "1", "-J"}
	if reverse {
		args = append(args, "-R")
	}
	var (
		res     iperfResult
		out     string
		lastErr error
	)
	for attempt := 0; attempt < 50; attempt++ {
		var errOut string
		out, errOut, lastErr = m.exec(client.machine, network, client.node, args...)
		res = iperfResult{}
		jerr := json.Unmarshal([]byte(out), &res)
		if lastErr == nil && jerr == nil && res.Error == "" {
			break
		}
		if !strings.Contains(res.Error+errOut, "refused") {
			t.Fatalf("iperf3 client on %v: %v (%s)\n%s\n%s", client, lastErr, res.Error, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lastErr != nil || res.Error != "" {
		t.Fatalf("iperf3 client on %v never connected: %v %s", client, lastErr, res.Error)
	}
	if err := srv.wait(30 * time.Second); err != nil {
		t.Errorf("iperf3 server on %v: %v\n%s%s", server, err, srv.stdout, srv.stderr)
	}
	return &res
}
