//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// The control paths of a programmable node's tables besides `trellis table` (ebpf_test.go):
// the HTTP API, the table socket inside the node, and what a kill -9 of up leaves.

// macOf returns the MAC of a node's eth1 in hex, without separators.
func macOf(t *testing.T, state, network, node string) string {
	t.Helper()
	return strings.ReplaceAll(strings.TrimSpace(mustExec(t, state, network, node, "cat", "/sys/class/net/eth1/address")), ":", "")
}

// TestEbpfTablesAPI fills examples/ebpf/l3's routes through the HTTP API: nothing crosses s1
// before, h1 reaches h2 after, and not once the route is deleted. Unknown networks, nodes and
// tables, keys and values of the wrong size, bad hex, writes to trellis's own table and a body
// of the wrong media type are refused with problems that say why, and change nothing.
func TestEbpfTablesAPI(t *testing.T) {
	needClang(t)
	e := start(t)
	topoPath, _, _ := copyL3(t)
	mustTrellis(t, e.state, "up", topoPath)
	s := startServe(t, e.state)
	const base = "/networks/ebpf-l3/nodes/s1/tables"
	var list struct {
		Tables []struct {
			Name     string `json:"name"`
			KeySize  int    `json:"key_size"`
			ReadOnly bool   `json:"read_only"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(s.must(200, "GET", base, "", ""), &list); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(list.Tables); got != "[{counters 4 false} {routes 8 false} {trellis_ports 4 true}]" {
		t.Errorf("GET %s: tables %s", base, got)
	}
	if err := tryPing(t, e.state, "ebpf-l3", "h1", "10.0.2.1"); err == nil {
		t.Fatal("h1 reaches h2 through s1 with an empty routes table")
	}
	body := func(value string) string { return fmt.Sprintf(`{"value":%q}`, value) }
	h1, h2 := macOf(t, e.state, "ebpf-l3", "h1"), macOf(t, e.state, "ebpf-l3", "h2")
	s.must(200, "PUT", base+"/routes/entries/18000000.0a000100", "application/json", body(h1+".0100"))
	got := s.must(200, "PUT", base+"/routes/entries/18000000.0a000200", "application/json", body(h2+".0200"))
	if want := fmt.Sprintf(`{"key":"180000000a000200","value":"%s0200"}`, h2); strings.TrimSpace(string(got)) != want {
		t.Errorf("PUT answered %s, want %s", got, want)
	}
	if out := mustExec(t, e.state, "ebpf-l3", "h1", "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.0.2.1"); !strings.Contains(out, "ttl=63") {
		t.Errorf("h2's replies do not come forwarded once:\n%s", out)
	}
	var forwarded struct{ Key, Value string }
	json.Unmarshal(s.must(200, "GET", base+"/counters/entries/00000000", "", ""), &forwarded)
	if forwarded.Value < "0400000000000000" {
		t.Errorf("counter of forwarded frames %q, want at least 4 (2 echoes, 2 replies)", forwarded.Value)
	}
	dump := string(s.must(200, "GET", base+"/routes", "", ""))
	for _, bad := range []struct {
		method, path, ctype, body string
		status                    int
		want                      string
	}{
		{"GET", base + "/route", "", "", 404, `no such table \"route\": the program's tables are counters, routes, trellis_ports`},
		{"GET", "/networks/ebpf-l3/nodes/s9/tables", "", "", 404, `has no node \"s9\": its nodes are h1, h2, s1`},
		{"GET", "/networks/ebpf-l3/nodes/h1/tables", "", "", 404, "node h1 has no dataplane program"},
		{"GET", "/networks/nope/nodes/s1/tables", "", "", 404, "no network named nope"},
		{"PUT", base + "/routes/entries/0a000200", "application/json", body(h2 + ".0200"), 422, "the key is 4 bytes, the table's keys are 8"},
		{"PUT", base + "/routes/entries/18000000.0a000300", "application/json", body("0200"), 422, "the value is 2 bytes, the table's values are 8"},
		{"PUT", base + "/routes/entries/18000000.0a000300", "application/json", body("zz"), 422, "is not hex bytes"},
		{"PUT", base + "/trellis_ports/entries/01000000", "application/json", body("00000000"), 403, "read-only"},
		{"PUT", base + "/routes/entries/18000000.0a000300", "text/plain", body(h2 + ".0200"), 415, "takes a body of type application/json"},
		{"GET", base + "/routes/entries/18000000.0a000300", "", "", 404, "no entry for key 180000000a000300"},
		{"DELETE", base + "/routes/entries/18000000.0a000300", "", "", 404, "no entry for key 180000000a000300"},
		{"DELETE", base + "/routes/entries/1800.0a000200", "", "", 422, "the key is 6 bytes"},
	} {
		status, body := s.do(bad.method, bad.path, bad.ctype, bad.body)
		if status != bad.status || !strings.Contains(string(body), bad.want) || !strings.Contains(string(body), `"status":`) {
			t.Errorf("%s %s: %d %s; want %d and a problem with %q", bad.method, bad.path, status, body, bad.status, bad.want)
		}
	}
	if after := string(s.must(200, "GET", base+"/routes", "", "")); after != dump {
		t.Errorf("refused requests changed the routes:\n%s\n%s", dump, after)
	}
	s.must(204, "DELETE", base+"/routes/entries/18000000.0a000200", "", "")
	if err := tryPing(t, e.state, "ebpf-l3", "h1", "10.0.2.1"); err == nil {
		t.Error("h1 still reaches h2 after the route was deleted through the API")
	}
	doc := string(s.must(200, "GET", "/openapi.json", "", ""))
	for _, op := range []string{"list-tables", "dump-table", "get-table-entry", "set-table-entry", "delete-table-entry"} {
		if !strings.Contains(doc, `"operationId":"`+op+`"`) {
			t.Errorf("the OpenAPI document has no operation %s", op)
		}
	}
	s.stop()
	mustTrellis(t, e.state, "down", "ebpf-l3")
	e.assertClean()
}

// tableClient is a client of the table socket, run inside a node with python3: each argument
// is a request line, whose answer it prints; "huge" sends a 3 MiB line, "flood N" opens N
// connections at once and prints how many were refused.
const tableClient = `
import socket, sys
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect("\0trellis/tables")
    return s, s.makefile("rb")
args = sys.argv[1:]
if args[0] == "huge":
    s, f = conn()
    try:
        s.sendall(b"x" * (3 << 20))
    except OSError:
        pass
    print(f.readline().decode().strip())
elif args[0] == "flood":
    socks = [conn() for _ in range(int(args[1]))]
    refused = 0
    for s, f in socks:
        try:
            s.sendall(b'{"op":"tables"}\n')
        except OSError:
            pass  # a refused connection may be closed already; its error line is there to read
        if b"too many connections" in f.readline():
            refused += 1
    print("refused", refused)
else:
    s, f = conn()
    for a in args:
        s.sendall(a.encode() + b"\n")
        print(f.readline().decode().strip())
`

// sockTopo is examples/ebpf/l3 with a second programmable node, s2 (examples/ebpf/flowcount,
// whose tables are flows and overflow), between h3 and h2.
const sockTopo = `name: ebpf-sock
nodes:
  h1: {addresses: {eth1: [10.0.1.1/24]}, exec: [ip route add default via 10.0.1.254]}
  h2: {addresses: {eth1: [10.0.2.1/24]}, exec: [ip route add default via 10.0.2.254]}
  h3:
  s1:
    dataplane: {program: l3.c}
    addresses: {eth1: [10.0.1.254/24], eth2: [10.0.2.254/24]}
    sysctl: {net.ipv4.ip_forward: 0}
  s2:
    dataplane: {program: flowcount.c}
links:
  - endpoints: [h1:eth1, s1:eth1]
  - endpoints: [s1:eth2, h2:eth1]
  - endpoints: [h3:eth1, s2:eth1]
  - endpoints: [s2:eth2, h2:eth2]
`

// TestEbpfTableSocket: a process of s1's root fills s1's routes through the table socket
// inside s1, and h1 reaches h2 through s1. s1's root cannot reach s2's tables through it (by
// name, by path tricks), nor write trellis's own table; a request that is not JSON, a 3 MiB
// request and 40 connections at once get error lines and the server goes on; a process of
// another user in s1 is refused, and h1 has no such socket. Killed, the server is started
// again by up; down ends it.
func TestEbpfTableSocket(t *testing.T) {
	needClang(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is not installed (%v): the test's client runs inside the node (apt-get install python3)", err)
	}
	e := start(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	topoPath := writeTopo(t, sockTopo)
	for _, f := range []string{"l3/l3.c", "flowcount/flowcount.c"} {
		data, err := os.ReadFile(filepath.Join(root, "examples/ebpf", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(topoPath), filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustTrellis(t, e.state, "up", topoPath)
	ask := func(node string, args ...string) []string {
		t.Helper()
		out, errOut, err := execIn(t, e.state, "ebpf-sock", node, append([]string{"python3", "-c", tableClient}, args...)...)
		if err != nil {
			t.Fatalf("the table client in %s: %v\n%s%s", node, err, out, errOut)
		}
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	h1, h2 := macOf(t, e.state, "ebpf-sock", "h1"), macOf(t, e.state, "ebpf-sock", "h2")
	got := ask("s1", `{"op":"tables"}`,
		`{"op":"set","table":"routes","key":"18000000.0a000100","value":"`+h1+`.0100"}`,
		`{"op":"set","table":"routes","key":"180000000a000200","value":"`+h2+`0200"}`,
		`{"op":"dump","table":"routes"}`)
	if !strings.Contains(got[0], `"name":"routes"`) || strings.Contains(got[0], "flows") || got[1] != `{"ok":true}` || got[2] != `{"ok":true}` ||
		!strings.Contains(got[3], `{"key":"180000000a000200","value":"`+h2+`0200"}`) {
		t.Fatalf("tables, set, set, dump through s1's socket answered:\n%s", strings.Join(got, "\n"))
	}
	if out := mustExec(t, e.state, "ebpf-sock", "h1", "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.0.2.1"); !strings.Contains(out, "ttl=63") {
		t.Errorf("h2's replies do not come forwarded once by s1:\n%s", out)
	}
	flows := mustTrellis(t, e.state, "table", "ebpf-sock", "s2", "flows")
	var reqs, wants []string
	for _, bad := range []struct{ req, want string }{
		{`{"op":"dump","table":"flows"}`, `no such table \"flows\": the program's tables are counters, routes, trellis_ports`},
		{`{"op":"set","table":"flows","key":"00","value":"00"}`, `no such table \"flows\"`},
		{`{"op":"dump","table":"../s2/flows"}`, `no such table \"../s2/flows\"`},
		{`{"op":"dump","table":"/sys/fs/bpf/flows"}`, `no such table`},
		{`{"op":"dump","table":"/proc/1/root/etc"}`, `no such table`},
		{`{"op":"get","table":"routes","key":"../../etc/passwd"}`, `is not hex bytes`},
		{`{"op":"set","table":"trellis_ports","key":"01000000","value":"00000000"}`, "read-only"},
		{`{"op":"del","table":"trellis_ports","key":"01000000"}`, "read-only"},
		{`{"op":"set","table":"routes","key":"0a000200","value":"00"}`, "the key is 4 bytes, the table's keys are 8"},
		{`{"op":"exec","table":"routes"}`, `no such table operation \"exec\"`},
		{`{"op":"get","table":"routes","key":"01","argv":["sh"]}`, `unknown field \"argv\"`},
		{`rm -rf /`, "not a request"},
	} {
		reqs = append(reqs, bad.req)
		wants = append(wants, bad.want)
	}
	for i, got := range ask("s1", reqs...) { // on one connection: an error does not end it
		if i >= len(wants) || !strings.Contains(got, `"ok":false`) || !strings.Contains(got, wants[i]) {
			t.Errorf("request %d of %d answered %s, want an error with %q", i+1, len(reqs), got, wants[min(i, len(wants)-1)])
		}
	}
	if got := ask("s1", "huge")[0]; !strings.Contains(got, "longer than") {
		t.Errorf("a 3 MiB request: answered %q, want an error", got)
	}
	if got := ask("s1", "flood", "40")[0]; got != "refused 24" {
		t.Errorf("40 connections at once: %q, want 24 of them refused (16 served)", got)
	}
	if out, errOut, err := execIn(t, e.state, "ebpf-sock", "s1", "setpriv", "--reuid", "1000", "python3", "-c", tableClient, `{"op":"tables"}`); err != nil || !strings.Contains(out, "serves the node's root (uid 0) only") {
		t.Errorf("uid 1000 in s1: %v, %q %q; want it refused", err, out, errOut)
	}
	if _, errOut, err := execIn(t, e.state, "ebpf-sock", "h1", "python3", "-c", tableClient, `{"op":"tables"}`); err == nil || !strings.Contains(errOut, "ConnectionRefusedError") {
		t.Errorf("h1 (no program) connecting: %v, %q; want no socket there", err, errOut)
	}
	if after := mustTrellis(t, e.state, "table", "ebpf-sock", "s2", "flows"); after != flows {
		t.Errorf("s2's flows changed through s1's socket:\n%s\n%s", flows, after)
	}
	if got := ask("s1", `{"op":"get","table":"routes","key":"180000000a000200"}`)[0]; got != `{"ok":true,"value":"`+h2+`0200"}` {
		t.Errorf("after the refused requests, the route reads %s", got)
	}

	servers := tableServers(t, e.state)
	if len(servers) != 2 {
		t.Fatalf("table servers of the state directory: %v, want s1's and s2's", servers)
	}
	for _, pid := range servers {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	waitNoTableServers(t, e.state)
	if d := mustTrellis(t, e.state, "diff", topoPath); !strings.Contains(d, "program s1: its table server is not running") {
		t.Errorf("diff with the table servers killed:\n%s", d)
	}
	mustTrellis(t, e.state, "up", topoPath)
	if got := ask("s1", `{"op":"get","table":"routes","key":"180000000a000200"}`)[0]; got != `{"ok":true,"value":"`+h2+`0200"}` {
		t.Errorf("after up started the server again, the route reads %s", got)
	}
	mustTrellis(t, e.state, "down", "ebpf-sock")
	waitNoTableServers(t, e.state)
	e.assertClean()
}

// tableServers returns the pids of the table servers of state directory state.
func tableServers(t *testing.T, state string) []int {
	t.Helper()
	id, err := os.ReadFile(filepath.Join(state, "id"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for pid, p := range testkit.Processes() {
		if len(p.Cmdline) > 1 && p.Cmdline[0] == "trellis-tables" && p.Cmdline[1] == strings.TrimSpace(string(id)) {
			out = append(out, pid)
		}
	}
	return out
}

// procRuns tells whether a process runs whose command line is arg0 and the id of state
// directory state (reading only the command lines: it is polled).
func procRuns(arg0, state string) bool {
	id, _ := os.ReadFile(filepath.Join(state, "id"))
	want := arg0 + "\x00" + strings.TrimSpace(string(id)) + "\x00"
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		if data, _ := os.ReadFile(p); len(id) > 0 && strings.HasPrefix(string(data), want) {
			return true
		}
	}
	return false
}

func waitNoTableServers(t *testing.T, state string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(tableServers(t, state)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("table servers still run: %v", tableServers(t, state))
		}
	}
}

// TestEbpfKill9 kills `trellis up` of examples/ebpf/l3 with SIGKILL as soon as its first node
// runs: down leaves nothing running. Then it kills up as soon as s1's program and table server
// are in place (before up records the network as up): the next up converges (diff shows
// nothing to do, one table server runs, a route set through the table forwards), and down
// leaves the host as it was.
func TestEbpfKill9(t *testing.T) {
	needClang(t)
	e := start(t)
	topoPath, _, _ := copyL3(t)
	// A start command of h2 that takes a while: up is still under way when s1's table server
	// starts (start commands run after the programs, before up records the network as up).
	topo, _ := os.ReadFile(topoPath)
	slow := strings.Replace(string(topo), "      - ip route add default via 10.0.2.254\n", "      - ip route add default via 10.0.2.254\n      - sleep 2\n", 1)
	if slow == string(topo) {
		t.Fatal("examples/ebpf/l3/l3.yaml has no start command for h2 where the test looks for it")
	}
	rewriteTopo(t, topoPath, slow)
	upKilledWhen(t, e.state, topoPath, "a node runs", func() bool { return procRuns("trellis-node", e.state) })
	mustTrellis(t, e.state, "down", "ebpf-l3")
	if procRuns("trellis-node", e.state) || procRuns("trellis-tables", e.state) {
		t.Error("down after the killed up left nodes or a table server running")
	}
	upKilledWhen(t, e.state, topoPath, "s1's table server runs", func() bool { return procRuns("trellis-tables", e.state) })
	mustTrellis(t, e.state, "up", topoPath)
	if d := mustTrellis(t, e.state, "diff", topoPath); !strings.Contains(d, "no changes") {
		t.Errorf("diff after the third up:\n%s", d)
	}
	if n := len(tableServers(t, e.state)); n != 1 {
		t.Errorf("%d table servers run, want s1's", n)
	}
	table := func(args ...string) string {
		return mustTrellis(t, e.state, append([]string{"table", "ebpf-l3", "s1"}, args...)...)
	}
	table("routes", "set", "18000000.0a000100", macOf(t, e.state, "ebpf-l3", "h1")+".0100")
	table("routes", "set", "18000000.0a000200", macOf(t, e.state, "ebpf-l3", "h2")+".0200")
	ping(t, e.state, "ebpf-l3", "h1", "10.0.2.1")
	mustTrellis(t, e.state, "down", "ebpf-l3")
	waitNoTableServers(t, e.state)
	e.assertClean()
}

// upKilledWhen runs `trellis up` of topoPath and kills it with SIGKILL as soon as cond holds
// (polled every few milliseconds); the test fails if up ends first.
func upKilledWhen(t *testing.T, state, topoPath, what string, cond func() bool) {
	t.Helper()
	cmd := exec.Command(trellisBin, "--state-dir", state, "up", topoPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("up ended (%v) before %s: %s", err, what, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	t.Logf("up killed once %s: %v", what, <-done)
}

// TestEbpfVMRefused: a VM node with a dataplane program is refused by diff and up, naming the
// file, line and field and what to do, and nothing is made.
func TestEbpfVMRefused(t *testing.T) {
	e := start(t)
	topoPath := writeTopo(t, "name: ebpf-vm\nnodes:\n  h1:\n  s1:\n    kind: vm\n    dataplane: {program: sw.c}\nlinks:\n  - endpoints: [h1:eth1, s1:eth1]\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(topoPath), "sw.c"), []byte("int x;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Base(topoPath) + ":6: nodes.s1.dataplane: a dataplane program needs a node of kind container, not vm; remove dataplane, or the node's kind"
	for _, verb := range []string{"diff", "up"} {
		if _, errOut, err := trellis(t, e.state, verb, topoPath); err == nil || !strings.Contains(errOut, want) {
			t.Errorf("trellis %s: %v, %q; want %q", verb, err, errOut, want)
		}
	}
	if nets := listNetworks(t, e.state); len(nets) != 0 {
		t.Errorf("networks after the refused up: %v", nets)
	}
	e.assertClean()
}
