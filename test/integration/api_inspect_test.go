//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ipAddr is what `ip -j addr` prints of an interface.
type ipAddr struct {
	Name      string `json:"ifname"`
	MAC       string `json:"address"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operstate"`
	Addrs     []struct {
		Local  string `json:"local"`
		Prefix int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// TestAPIInspectFollowsNodes checks what a running server's inspect shows of nodes, whose
// running processes, devices and addresses it keeps between requests: each node's interfaces
// are what `ip addr` shows inside the node, also right after a change made inside it, and
// the links' counters are read afresh on each request; a node killed
// behind the server's back shows as not running at once (in inspect and /metrics), and
// running again, with its new process, once up starts it again.
func TestAPIInspectFollowsNodes(t *testing.T) {
	e := start(t)
	name := "apii" + nonce()[:4]
	registerNetwork(name)
	s := startServe(t, e.state)
	file := fmt.Sprintf(apiTopo, name)
	s.must(201, "POST", "/networks", "application/yaml", file)
	info := s.inspect(name)
	for _, node := range []string{"a", "b"} {
		var inside []ipAddr
		if err := json.Unmarshal([]byte(mustExec(t, e.state, name, node, "ip", "-j", "addr")), &inside); err != nil {
			t.Fatal(err)
		}
		checkInterfaces(t, node, info.node(t, node).Interfaces, inside)
	}
	checkInspectFresh(t, s, e.state, name)
	up := func(node string) float64 {
		return s.metric("trellis_node_up", fmt.Sprintf(`machine="%s",network="%s",node="%s"`, mustHostname(t), name, node))
	}
	if up("a") != 1 || up("b") != 1 {
		t.Fatalf("trellis_node_up: a %v, b %v, want 1", up("a"), up("b"))
	}
	pid := info.node(t, "a").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node a's init %d still there 5s after SIGKILL", pid)
		}
	}
	if a, b := s.inspect(name).node(t, "a"), s.inspect(name).node(t, "b"); a.Running || a.PID != 0 || len(a.Interfaces) != 0 || !b.Running {
		t.Errorf("inspect after a's init was killed: a %+v, b running %v; want a not running, b running", a, b.Running)
	}
	if up("a") != 0 || up("b") != 1 {
		t.Errorf("trellis_node_up after a's init was killed: a %v, b %v; want 0 and 1", up("a"), up("b"))
	}
	s.must(200, "POST", "/networks", "application/yaml", file) // starts a again
	if a := s.inspect(name).node(t, "a"); !a.Running || a.PID == pid || a.PID == 0 || len(a.Interfaces) != 2 {
		t.Errorf("inspect after up started a again: %+v (old pid %d)", a, pid)
	}
	if up("a") != 1 {
		t.Errorf("trellis_node_up of a after up started it again: %v", up("a"))
	}
	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}

// checkInterfaces compares what inspect shows of a node's interfaces with what `ip -j addr`
// printed inside it.
func checkInterfaces(t *testing.T, node string, got []ifInfo, inside []ipAddr) {
	t.Helper()
	if len(got) != len(inside) {
		t.Fatalf("%s: inspect shows %d interfaces, ip addr %d: %+v, %+v", node, len(got), len(inside), got, inside)
	}
	for i, in := range inside {
		g := got[i]
		var addrs []string
		for _, a := range in.Addrs {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.Prefix))
		}
		mac := in.MAC
		if mac == "00:00:00:00:00:00" {
			mac = "" // inspect shows none for loopback, as netlink has it
		}
		if g.Name != in.Name || g.MAC != mac || g.MTU != in.MTU || g.State != map[string]string{"UP": "up", "DOWN": "down", "UNKNOWN": "unknown"}[in.OperState] ||
			!slices.Equal(g.Addresses, addrs) {
			t.Errorf("%s: inspect shows %+v, ip addr %s %s mtu %d %s %v", node, g, in.Name, in.MAC, in.MTU, in.OperState, addrs)
		}
	}
}

// TestAPIExecClientGoesAway starts a long exec through the API and drops the connection in the
// middle: the server kills the command and keeps serving (the next exec runs).
func TestAPIExecClientGoesAway(t *testing.T) {
	e := start(t)
	name := "apix" + nonce()[:4]
	registerNetwork(name)
	s := startServe(t, e.state)
	s.must(201, "POST", "/networks", "application/yaml", fmt.Sprintf(apiTopo, name))
	marker := fmt.Sprintf("1000.%06d", time.Now().UnixNano()%1000000) // a duration sleep takes, unique
	ctx, cancel := context.WithCancel(context.Background())
	body := fmt.Sprintf(`{"argv":["sleep","%s"]}`, marker)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://trellis/networks/"+name+"/nodes/a/exec", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := s.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for i := 0; !processWith("sleep\x00" + marker); i++ {
		if i == 100 {
			t.Fatalf("no sleep %s running 10 s after the exec was sent", marker)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel() // the client goes away: its connection closes
	if err := <-done; err == nil {
		t.Errorf("the exec answered before its client went away")
	}
	deadline := time.Now().Add(10 * time.Second)
	for processWith("sleep\x00"+marker) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if processWith("sleep\x00" + marker) {
		t.Errorf("sleep %s still runs 10 s after its client went away", marker)
	}
	var r execResult
	if err := json.Unmarshal(s.must(200, "POST", "/networks/"+name+"/nodes/a/exec", "application/json", `{"argv":["hostname"]}`), &r); err != nil || r.Stdout != "a\n" {
		t.Errorf("the next exec: %+v, %v", r, err)
	}
	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}

// checkInspectFresh checks that an inspect right after a change inside node b (an address
// added, an MTU changed) shows it, and that a ping moves the link's counters.
func checkInspectFresh(t *testing.T, s *apiServer, state, name string) {
	t.Helper()
	const link = "a:eth1--b:eth1"
	before := s.inspect(name).link(t, link).Endpoints
	mustExec(t, state, name, "b", "ip", "addr", "add", "10.77.0.1/32", "dev", "lo")
	mustExec(t, state, name, "b", "ip", "link", "set", "eth1", "mtu", "1400")
	info := s.inspect(name)
	var inside []ipAddr
	if err := json.Unmarshal([]byte(mustExec(t, state, name, "b", "ip", "-j", "addr")), &inside); err != nil {
		t.Fatal(err)
	}
	checkInterfaces(t, "b", info.node(t, "b").Interfaces, inside)
	lo := slices.IndexFunc(info.node(t, "b").Interfaces, func(i ifInfo) bool { return i.Name == "lo" })
	if lo < 0 || !slices.Contains(info.node(t, "b").Interfaces[lo].Addresses, "10.77.0.1/32") {
		t.Errorf("inspect right after an address was added to b's lo: %+v", info.node(t, "b").Interfaces)
	}
	mustExec(t, state, name, "a", "ping", "-c", "3", "-i", "0.2", "10.0.0.2")
	after := s.inspect(name).link(t, link).Endpoints
	for i := range after {
		if after[i].TxPackets < before[i].TxPackets+3 || after[i].RxPackets < before[i].RxPackets+3 {
			t.Errorf("endpoint %s:%s counters before a ping %+v, after %+v: want 3 more each way", after[i].Node, after[i].Interface, before[i], after[i])
		}
	}
}
