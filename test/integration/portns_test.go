//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/metrics"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// portNSTopo has a link of each connector whose ports carry something of trellis's: a
// shortbridge with a rate cap (a shaper on its ports), a bridge with an impairment (every frame
// b sends is duplicated) and a LAN of three.
const portNSTopo = `name: pns
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24]
      eth2: [10.0.2.1/24]
  b:
    addresses:
      eth1: [10.0.0.2/24]
      eth2: [10.0.1.1/24]
      eth3: [10.0.2.2/24]
  c:
    addresses:
      eth1: [10.0.1.2/24]
      eth3: [10.0.2.3/24]
links:
  - endpoints: [a:eth1, b:eth1]
    rate: 10mbit
  - endpoints: [b:eth2, c:eth1]
    connector: bridge
    duplicate: 100%
  - endpoints: [a:eth2, b:eth3, c:eth3]
    name: lan
    connector: lan
`

// portNSEntries lists the port namespaces (trp...) bound under /run/netns.
func portNSEntries(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "trp") {
			out[e.Name()] = true
		}
	}
	return out
}

// assertNoNewPortNS fails if a port namespace not in before is bound under /run/netns.
func assertNoNewPortNS(t *testing.T, before map[string]bool) {
	t.Helper()
	for name := range portNSEntries(t) {
		if !before[name] {
			t.Errorf("port namespace %s is left under /run/netns", name)
		}
	}
}

// TestPortNamespace (issue 26, item 2): with TRELLIS_PORT_NETNS=auto a network's ports
// are in a namespace of the network's own, not in the root namespace, and everything that
// works on ports follows them: connectors (shortbridge, bridge, LAN), the rate's shaper, an
// impairment, the carrier (link down/up), inspect and capture; down removes the namespace.
// On 5ddc709 the variable was not read, and on 2c31a7d there was no auto.
func TestPortNamespace(t *testing.T) {
	e := start(t)
	before := portNSEntries(t)
	t.Setenv(substrate.PortNSEnv, "auto")
	mustTrellis(t, e.state, "up", writeTopo(t, portNSTopo))
	info := inspect(t, e.state, "pns")
	nsName := substrate.PortNSName(info.NetID)
	ns, err := netns.GetFromName(nsName)
	if err != nil {
		t.Fatalf("the network's port namespace %s: %v", nsName, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ports := 0
	for _, l := range info.Links {
		for _, ep := range l.Endpoints {
			ports++
			if _, err := netlink.LinkByName(ep.Port); err == nil {
				t.Errorf("port %s of %s is in the root namespace", ep.Port, l.Name)
			}
			dev, err := h.LinkByName(ep.Port)
			if err != nil {
				t.Errorf("port %s of %s is not in %s: %v", ep.Port, l.Name, nsName, err)
				continue
			}
			if ep.State != "up" {
				t.Errorf("inspect says port %s is %q, want up", ep.Port, ep.State)
			}
			if l.Rate != "" && l.Rate != "-" {
				qs, err := h.QdiscList(dev)
				if err != nil {
					t.Fatal(err)
				}
				tbf := false
				for _, q := range qs {
					_, tbf = q.(*netlink.Tbf)
					if tbf {
						break
					}
				}
				if !tbf {
					t.Errorf("port %s of the capped link %s has no shaper (qdiscs %v)", ep.Port, l.Name, qs)
				}
			}
		}
	}
	if ports != 7 {
		t.Errorf("inspect lists %d ports, want 7", ports)
	}
	ping(t, e.state, "pns", "a", "10.0.0.2")           // shortbridge
	ping(t, e.state, "pns", "a", "10.0.2.3")           // LAN
	pingEventually(t, e.state, "pns", "b", "10.0.1.2") // bridge
	if out, _, _ := execIn(t, e.state, "pns", "b", "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.1.2"); !strings.Contains(out, "DUP!") {
		t.Errorf("b's pings over the link that duplicates all it sends got no duplicate:\n%s", out)
	}
	checkPortNSCapture(t, e.state)
	checkPortNSMetrics(t, e.state)
	if n := snapshot(t).OursCount()["netns held"]; n != 1 {
		t.Errorf("the host snapshot holds %d namespaces of the test held by no process, want 1 (the port namespace)", n)
	}

	mustTrellis(t, e.state, "link", "pns", "a:eth1--b:eth1", "down")
	if err := tryPing(t, e.state, "pns", "a", "10.0.0.2"); err == nil {
		t.Error("a reaches b over a link that is down")
	}
	mustTrellis(t, e.state, "link", "pns", "a:eth1--b:eth1", "up")
	pingEventually(t, e.state, "pns", "a", "10.0.0.2")

	mustTrellis(t, e.state, "down", "pns")
	assertNoNewPortNS(t, before)
	e.assertClean()
}

// checkPortNSMetrics scrapes the metrics (in process, as `trellis serve` does): every port of
// pns is up, a's pings were counted, and the duplicates of b's frames over the bridge link too.
func checkPortNSMetrics(t *testing.T, stateDir string) {
	t.Helper()
	st, err := state.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	metrics.New(st).Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	sample := func(name, node, ifname string) (float64, bool) {
		for _, line := range strings.Split(rr.Body.String(), "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `network="pns"`) &&
				strings.Contains(line, `node="`+node+`"`) && strings.Contains(line, `interface="`+ifname+`"`) {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	for _, ep := range []struct{ node, ifname string }{{"a", "eth1"}, {"a", "eth2"}, {"b", "eth1"}, {"b", "eth2"}, {"b", "eth3"}, {"c", "eth1"}, {"c", "eth3"}} {
		if v, ok := sample("trellis_port_up", ep.node, ep.ifname); !ok || v != 1 {
			t.Errorf("metrics: trellis_port_up of %s:%s is %v (found %v), want 1", ep.node, ep.ifname, v, ok)
		}
	}
	if v, _ := sample("trellis_port_tx_frames_total", "a", "eth1"); v == 0 {
		t.Error("metrics: a:eth1 sent no frame, after a's pings")
	}
	if v, _ := sample("trellis_port_impairment_duplicates_total", "b", "eth2"); v == 0 {
		t.Error("metrics: the link that duplicates all b sends duplicated nothing")
	}
}

// checkPortNSCapture captures a's echo request and b's reply on the shortbridge link, whose
// ports are in the port namespace.
func checkPortNSCapture(t *testing.T, state string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pns.pcapng")
	capture := exec.Command(trellisBin, "--state-dir", state, "capture", "pns", "a:eth1--b:eth1", "-c", "2", "-w", file, "icmp")
	var errOut bytes.Buffer
	capture.Stderr = &errOut
	if err := capture.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- capture.Wait() }()
	for i := 0; i < 50; i++ {
		tryPing(t, state, "pns", "a", "10.0.0.2")
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("capture: %v\n%s", err, errOut.String())
			}
			out, err := exec.Command("tcpdump", "-n", "-r", file).CombinedOutput()
			if err != nil {
				t.Fatalf("tcpdump -r: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "10.0.0.1 > 10.0.0.2: ICMP echo request") {
				t.Errorf("the capture holds:\n%s\nwant a's echo request", out)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = capture.Process.Kill()
	<-done
	t.Fatalf("capture caught no two frames in 50 pings: %s", errOut.String())
}

// TestPortNamespaceRefusals: what does not follow ports into a port namespace yet (a delay
// line here) is refused before anything is made with --port-netns network, naming the setting;
// with auto such a network has its ports in the root namespace, as with --port-netns root.
// A network keeps where its ports are: one whose ports are in the root namespace stays there
// when an `up` under auto changes it, and one in its port namespace refuses a live
// delay, saying how to have it. Under the default (root) a live delay works.
func TestPortNamespaceRefusals(t *testing.T) {
	e := start(t)
	before := portNSEntries(t)
	t.Setenv(substrate.PortNSEnv, "auto")
	delayed := writeTopo(t, rateTopo("pnsdelay", "    delay: 10ms\n"))
	_, errOut, err := trellis(t, e.state, "--port-netns", "network", "up", delayed)
	if err == nil || !strings.Contains(errOut, "--port-netns") || !strings.Contains(errOut, substrate.PortNSEnv) || !strings.Contains(errOut, "delay") {
		t.Errorf("up of a delayed link with ports in a namespace: err %v, stderr %q; want a refusal naming --port-netns, %s and the delay", err, errOut, substrate.PortNSEnv)
	}
	assertNoNewPortNS(t, before)
	out, errOut, err := trellis(t, e.state, "up", "-v", delayed)
	if err != nil {
		t.Fatalf("up of a delayed link under auto: %v\n%s%s", err, out, errOut)
	}
	if says := out + errOut; !strings.Contains(says, "root namespace") || !strings.Contains(says, "delay") {
		t.Errorf("up -v of a delayed link does not say why its ports are in the root namespace:\n%s", says)
	}
	assertPortsIn(t, e.state, "pnsdelay", false)
	mustTrellis(t, e.state, "down", "pnsdelay")

	// Links with a rate: they have ports whatever kind of link a plain one is.
	mustTrellis(t, e.state, "--port-netns", "root", "up", writeTopo(t, rateTopo("pnsroot", "    rate: 10mbit\n")))
	assertPortsIn(t, e.state, "pnsroot", false)
	mustTrellis(t, e.state, "up", writeTopo(t, rateTopo("pnsroot", "    rate: 20mbit\n")))
	assertPortsIn(t, e.state, "pnsroot", false)
	mustTrellis(t, e.state, "down", "pnsroot")

	mustTrellis(t, e.state, "up", writeTopo(t, rateTopo("pnsown", "    rate: 10mbit\n")))
	assertPortsIn(t, e.state, "pnsown", true)
	_, errOut, err = trellis(t, e.state, "link", "pnsown", "a:eth1--b:eth1", "set", "delay=10ms")
	if err == nil || !strings.Contains(errOut, "take the network down and up again with --port-netns root") {
		t.Errorf("a live delay on a network in its port namespace: err %v, stderr %q; want a refusal saying how to have it", err, errOut)
	}
	assertPortsIn(t, e.state, "pnsown", true)
	ping(t, e.state, "pnsown", "a", "10.0.0.2")
	mustTrellis(t, e.state, "down", "pnsown")

	// The default is the root namespace, where a live delay works.
	t.Setenv(substrate.PortNSEnv, "")
	mustTrellis(t, e.state, "up", writeTopo(t, rateTopo("pnsdef", "    rate: 10mbit\n")))
	assertPortsIn(t, e.state, "pnsdef", false)
	mustTrellis(t, e.state, "link", "pnsdef", "a:eth1--b:eth1", "set", "delay=10ms")
	ping(t, e.state, "pnsdef", "a", "10.0.0.2")
	mustTrellis(t, e.state, "down", "pnsdef")
	assertNoNewPortNS(t, before)
	e.assertClean()
}

// assertPortsIn checks that every port of network name is in its port namespace (ns) or in
// the root namespace (and not in the other).
func assertPortsIn(t *testing.T, state, name string, ns bool) {
	t.Helper()
	info := inspect(t, state, name)
	if has := hasPortNS(t, info.NetID); has != ns {
		t.Errorf("network %s has a port namespace: %v, want %v", name, has, ns)
	}
	root := devicesNamed(t, info.NetID, true)
	ports := 0
	for _, l := range info.Links {
		for _, ep := range l.Endpoints {
			if ep.Port == "" {
				continue
			}
			ports++
			if _, err := portLink(t, ep.Port); err != nil {
				t.Errorf("port %s of %s: %v", ep.Port, name, err)
			}
			if root[ep.Port] != !ns {
				t.Errorf("port %s of %s is in the root namespace: %v, want %v", ep.Port, name, root[ep.Port], !ns)
			}
		}
	}
	if ports == 0 {
		t.Errorf("network %s has no port", name)
	}
}

// TestPortNamespaceKillDuringUp: an `up` killed (SIGKILL) while it makes a 200-node chain's
// ports in the network's port namespace (once the first ports are there, and a while later)
// leaves all that `trellis down` removes: the namespace, with the ports in it, too.
func TestPortNamespaceKillDuringUp(t *testing.T) {
	for _, after := range []int{1, 100} {
		t.Run(fmt.Sprintf("after%dports", after), func(t *testing.T) {
			e := start(t)
			before := portNSEntries(t)
			t.Setenv(substrate.PortNSEnv, "network")
			// Links with ports: a plain link is one veth pair, with no port.
			topo := strings.ReplaceAll(chainTopo("chain", 200), "eth0]\n", "eth0]\n    connector: shortbridge\n")
			cmd := exec.Command(trellisBin, "--state-dir", e.state, "up", writeTopo(t, topo))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			made := waitPorts(t, after, cmd)
			_ = killProcess(cmd.Process)
			_ = cmd.Wait()
			t.Logf("killed with %d ports made: %v", made, snapshot(t).OursCount())
			if made < after {
				t.Errorf("up made %d ports in its port namespace, want at least %d before the kill", made, after)
			}
			if out, errOut, err := trellis(t, e.state, "down", "chain"); err != nil {
				t.Errorf("trellis down chain after up was killed: %v\n%s%s", err, out, errOut)
			}
			assertNoNewPortNS(t, before)
			e.assertClean()
		})
	}
}

// waitPorts waits (at most a minute, scaled) until a new port namespace holds at least n
// devices besides its loopback, or cmd ended, and returns how many it holds.
func waitPorts(t *testing.T, n int, cmd *exec.Cmd) int {
	t.Helper()
	deadline := time.Now().Add(time.Duration(float64(time.Minute) * timeScale()))
	for time.Now().Before(deadline) {
		for name := range portNSEntries(t) {
			if got := devicesIn(name); got >= n {
				return got
			}
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// devicesIn counts the devices of named network namespace name besides its loopback (0 if it
// cannot be read).
func devicesIn(name string) int {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return 0
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return 0
	}
	return len(links) - 1
}

// inPorts runs f where network netID has its ports: on a thread inside its port namespace if
// it has one (auto or network for a new network), else here, in the root namespace. Netlink calls
// and eBPF queries by ifindex in f see the ports.
func inPorts(t testing.TB, netID string, f func() error) error {
	t.Helper()
	ns, ok, err := substrate.OpenPortNS(netID)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return f()
	}
	defer ns.Close()
	return netnsutil.Do(ns, f)
}

// inPortsOf runs f where the network of port (by the id in its name) has its ports (inPorts).
func inPortsOf(t testing.TB, port string, f func() error) error {
	t.Helper()
	return inPorts(t, plan.DeviceNetID(port), f)
}

// portLink finds port's device where its network's ports are (inPortsOf).
func portLink(t testing.TB, port string) (l netlink.Link, err error) {
	t.Helper()
	err = inPortsOf(t, port, func() (err error) {
		l, err = netlink.LinkByName(port)
		return err
	})
	return l, err
}

// portNSArgs are the arguments that make ip(8) or tc(8) act where port's network has its
// ports: -n and its port namespace, or none (the root namespace).
func portNSArgs(port string) []string {
	id := plan.DeviceNetID(port)
	if _, err := os.Stat(filepath.Join("/run/netns", substrate.PortNSName(id))); id == "" || err != nil {
		return nil
	}
	return []string{"-n", substrate.PortNSName(id)}
}

// devicesNamed lists the devices named after network netID where its ports are (inPorts), or
// in the root namespace.
func devicesNamed(t *testing.T, netID string, root bool) map[string]bool {
	t.Helper()
	have := map[string]bool{}
	list := func() error {
		links, err := testkit.RetryDump(netlink.LinkList)
		for _, l := range links {
			if name := l.Attrs().Name; strings.HasPrefix(name, "tr"+netID) {
				have[name] = true
			}
		}
		return err
	}
	var err error
	if root {
		err = list()
	} else {
		err = inPorts(t, netID, list)
	}
	if err != nil {
		t.Fatal(err)
	}
	return have
}

// hasPortNS tells whether network netID has a port namespace.
func hasPortNS(t *testing.T, netID string) bool {
	t.Helper()
	ns, ok, err := substrate.OpenPortNS(netID)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		ns.Close()
	}
	return ok
}
