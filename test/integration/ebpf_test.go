//go:build integration

package integration

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// needClang fails the test without clang, which compiles the nodes' programs.
func needClang(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatalf("clang is not installed (%v): scripts/setup.sh installs it (Debian: apt-get install clang)", err)
	}
}

// TestEbpfL3 brings up examples/ebpf/l3: s1 forwards IPv4 with l3.c, its kernel forwarding
// nothing. Nothing crosses s1 until its routes table is filled with `trellis table ... set`;
// then h1 reaches h2 with the TTL down by one and the program's counter up; once the route is
// deleted, nothing crosses again. Table names and sizes that are wrong are refused, naming
// what the table has, and change nothing.
func TestEbpfL3(t *testing.T) {
	needClang(t)
	e := start(t)
	// A copy of the example, whose program the reload below changes.
	topoPath, progPath, prog := copyL3(t)
	mustTrellis(t, e.state, "up", topoPath)
	tables := mustTrellis(t, e.state, "table", "ebpf-l3", "s1")
	if !regexp.MustCompile(`(?m)^routes +LPMTrie +8 +8 +4096`).MatchString(tables) || !strings.Contains(tables, "counters") {
		t.Fatalf("trellis table ebpf-l3 s1 does not list routes (LPM, 8-byte keys and values) and counters:\n%s", tables)
	}
	if err := tryPing(t, e.state, "ebpf-l3", "h1", "10.0.2.1"); err == nil {
		t.Fatal("h1 reaches h2 through s1 with an empty routes table")
	}
	mac := func(node string) string {
		return strings.ReplaceAll(strings.TrimSpace(mustExec(t, e.state, "ebpf-l3", node, "cat", "/sys/class/net/eth1/address")), ":", "")
	}
	table := func(args ...string) string {
		return mustTrellis(t, e.state, append([]string{"table", "ebpf-l3", "s1"}, args...)...)
	}
	table("routes", "set", "18000000.0a000100", mac("h1")+".0100") // 10.0.1.0/24: port 1
	table("routes", "set", "18000000.0a000200", mac("h2")+".0200") // 10.0.2.0/24: port 2
	out := mustExec(t, e.state, "ebpf-l3", "h1", "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.2.1")
	if !strings.Contains(out, "ttl=63") {
		t.Errorf("h2's replies do not come with the TTL one down (forwarded once):\n%s", out)
	}
	if got := table("counters", "get", "00000000"); strings.TrimSpace(got) < "0600000000000000" {
		t.Errorf("counter of forwarded frames = %s, want at least 6 (3 echoes, 3 replies)", got)
	}

	before := table("routes", "dump")
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"route", "get", "18000000.0a000200"}, `no such table "route": the program's tables are counters, routes, trellis_ports`},
		{[]string{"routes", "set", "0a000200", mac("h2") + ".0200"}, "the key is 4 bytes, the table's keys are 8"},
		{[]string{"routes", "set", "18000000.0a000300", "0200"}, "the value is 2 bytes, the table's values are 8"},
		{[]string{"routes", "del", "1800.0a000200"}, "the key is 6 bytes, the table's keys are 8"},
		{[]string{"trellis_ports", "set", "01000000", "00000000"}, "read-only"},
	} {
		_, errOut, err := trellis(t, e.state, append([]string{"table", "ebpf-l3", "s1"}, bad.args...)...)
		if err == nil || !strings.Contains(errOut, bad.want) {
			t.Errorf("trellis table ebpf-l3 s1 %s: %v, %q; want an error with %q", strings.Join(bad.args, " "), err, errOut, bad.want)
		}
	}
	if after := table("routes", "dump"); after != before {
		t.Errorf("refused commands changed the routes:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	table("routes", "del", "18000000.0a000200")
	if err := tryPing(t, e.state, "ebpf-l3", "h1", "10.0.2.1"); err == nil {
		t.Fatal("h1 still reaches h2 after the route to 10.0.2.0/24 was deleted")
	}
	if got := table("counters", "get", "01000000"); strings.TrimSpace(got) == "0000000000000000" {
		t.Errorf("no frame counted as dropped for want of a route after the route went")
	}
	table("routes", "set", "18000000.0a000200", mac("h2")+".0200")
	testEbpfReload(t, e.state, topoPath, progPath, string(prog), table)
	mustTrellis(t, e.state, "down", "ebpf-l3")
	e.assertClean()
}

// testEbpfReload changes s1's program (a fourth counter: the counters table's layout changes,
// the routes table's does not) and runs up: the new program runs on the same node and ports,
// with the routes as they were and new counters. Then a version the verifier refuses: up
// fails with the verifier's message, and the program before it keeps forwarding.
func testEbpfReload(t *testing.T, state, topoPath, progPath, prog string, table func(...string) string) {
	pids := inspect(t, state, "ebpf-l3").pids()
	ifindex := mustExec(t, state, "ebpf-l3", "s1", "cat", "/sys/class/net/eth1/ifindex")
	changed := strings.Replace(prog, "enum { FORWARDED, NO_ROUTE, TTL_OUT, NCOUNTERS };", "enum { FORWARDED, NO_ROUTE, TTL_OUT, RELOADED, NCOUNTERS };", 1)
	if changed == prog {
		t.Fatal("the example's counters enum is not where the test looks for it")
	}
	if err := os.WriteFile(progPath, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustTrellis(t, state, "diff", topoPath); !strings.Contains(out, "program s1") {
		t.Errorf("diff does not show s1's program changed:\n%s", out)
	}
	mustTrellis(t, state, "up", topoPath)
	if after := inspect(t, state, "ebpf-l3").pids(); !maps.Equal(after, pids) {
		t.Errorf("nodes restarted by a changed program: %v -> %v", pids, after)
	}
	if after := mustExec(t, state, "ebpf-l3", "s1", "cat", "/sys/class/net/eth1/ifindex"); after != ifindex {
		t.Errorf("s1's eth1 made anew by a changed program: ifindex %s -> %s", ifindex, after)
	}
	if n := strings.Count(table("counters"), "\n"); n != 4 {
		t.Errorf("the reloaded program's counters have %d entries, want 4", n)
	}
	ping(t, state, "ebpf-l3", "h1", "10.0.2.1") // the routes were kept

	bad := strings.Replace(changed, "if ((void *)(ip + 1) > end ||", "if (", 1) // no bounds check
	if err := os.WriteFile(progPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := trellis(t, state, "up", topoPath)
	if err == nil || !strings.Contains(errOut, "the kernel's verifier rejected the program") || !strings.Contains(errOut, "l3.c:") {
		t.Errorf("up of a program the verifier refuses: %v, %q; want the verifier's message with the program's lines", err, errOut)
	}
	ping(t, state, "ebpf-l3", "h1", "10.0.2.1")
	if n := strings.Count(table("counters"), "\n"); n != 4 {
		t.Errorf("after the refused up the counters have %d entries, want the 4 of the program before", n)
	}
}

// TestEbpfBadProgram: a program that does not compile, and one the kernel's verifier
// refuses, are refused by up with clang's and the verifier's messages, naming the program's
// file and line, and nothing is created.
func TestEbpfBadProgram(t *testing.T) {
	needClang(t)
	e := start(t)
	topo := `name: ebpf-bad
nodes:
  h1:
  s1:
    dataplane: {program: sw.c}
links:
  - endpoints: [h1:eth1, s1:eth1]
`
	tests := []struct {
		name, prog string
		want       []string
	}{
		{"does not compile", "#include \"trellis.h\"\n\nTRELLIS_PROGRAM int sw(struct __sk_buff *skb)\n{\n\treturn no_such_thing;\n}\nTRELLIS_LICENSE;\n",
			[]string{":5: nodes.s1.dataplane: program does not compile", "sw.c:5:9: error: use of undeclared identifier 'no_such_thing'"}},
		{"verifier", "#include \"trellis.h\"\n\nTRELLIS_PROGRAM int sw(struct __sk_buff *skb)\n{\n\tunsigned char *data = (void *)(long)skb->data;\n\treturn data[20];\n}\nTRELLIS_LICENSE;\n",
			[]string{":5: nodes.s1.dataplane: the kernel's verifier rejected the program", "@ sw.c:6", "invalid access to packet"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTopo(t, topo)
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "sw.c"), []byte(tc.prog), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errOut, err := trellis(t, e.state, "up", path)
			if err == nil {
				t.Fatal("up accepted the program")
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("up's error does not say %q:\n%s", w, errOut)
				}
			}
			if nets := listNetworks(t, e.state); len(nets) != 0 {
				t.Errorf("networks after the refused up: %v", nets)
			}
		})
	}
	e.assertClean()
}

// copyL3 copies examples/ebpf/l3 (its topology and program) into a directory of the test's,
// returning the copies' paths and the program's text.
func copyL3(t *testing.T) (topoPath, progPath string, prog []byte) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	topo, err := os.ReadFile(filepath.Join(root, "examples/ebpf/l3/l3.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if prog, err = os.ReadFile(filepath.Join(root, "examples/ebpf/l3/l3.c")); err != nil {
		t.Fatal(err)
	}
	topoPath = writeTopo(t, string(topo))
	progPath = filepath.Join(filepath.Dir(topoPath), "l3.c")
	if err := os.WriteFile(progPath, prog, 0o644); err != nil {
		t.Fatal(err)
	}
	return topoPath, progPath, prog
}
