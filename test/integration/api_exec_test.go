//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type execResult struct {
	ExitCode int     `json:"exit_code"`
	Stdout   string  `json:"stdout"`
	Stderr   string  `json:"stderr"`
	TimedOut bool    `json:"timed_out"`
	Seconds  float64 `json:"seconds"`
}

// TestAPIExecAndImpairments runs commands in a node through the API (output, stdin, exit
// codes, a timeout, unknown nodes) and changes a link's impairments live through the API and
// the CLI: one direction, both, none; pings show them, inspect and diff name them.
func TestAPIExecAndImpairments(t *testing.T) {
	e := start(t)
	name := "apix" + nonce()[:4]
	registerNetwork(name)
	s := startServe(t, e.state)
	file := fmt.Sprintf(apiTopo, name)
	const link = "a:eth1--b:eth1"
	s.must(201, "POST", "/networks", "application/yaml", file)
	run := func(node, body string) execResult {
		t.Helper()
		var r execResult
		if err := json.Unmarshal(s.must(200, "POST", "/networks/"+name+"/nodes/"+node+"/exec", "application/json", body), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		name, body string
		check      func(execResult) bool
	}{
		{"output", `{"argv":["ip","-o","-4","addr","show","eth1"]}`, func(r execResult) bool {
			return r.ExitCode == 0 && strings.Contains(r.Stdout, "10.0.0.1/24") && r.Stderr == ""
		}},
		{"stdin", `{"argv":["tr","a-z","A-Z"],"stdin":"hello\n"}`, func(r execResult) bool { return r.Stdout == "HELLO\n" }},
		{"exit code and stderr", `{"argv":["sh","-c","echo oops >&2; exit 3"]}`, func(r execResult) bool {
			return r.ExitCode == 3 && r.Stderr == "oops\n"
		}},
		{"not found", `{"argv":["no-such-command"]}`, func(r execResult) bool { return r.ExitCode == 127 && r.Stderr != "" }},
		{"timeout", `{"argv":["sleep","30"],"timeout":0.5}`, func(r execResult) bool {
			return r.TimedOut && r.ExitCode == 128+9 && r.Seconds < 5
		}},
	}
	for _, c := range cases {
		if r := run("a", c.body); !c.check(r) {
			t.Errorf("exec %s: %s: %+v", c.name, c.body, r)
		}
	}
	if r := run("b", `{"argv":["hostname"]}`); r.Stdout != "b\n" {
		t.Errorf("hostname in b: %+v", r)
	}
	s.must(404, "POST", "/networks/"+name+"/nodes/zz/exec", "application/json", `{"argv":["true"]}`)

	imp := func(body string) {
		s.must(200, "PUT", "/networks/"+name+"/links/"+link+"/impairments", "application/json", body)
	}
	want := func(a, b string) {
		t.Helper()
		l := s.inspect(name).link(t, link)
		got := map[string]string{}
		for _, ep := range l.Endpoints {
			got[ep.Node] = ep.Impairment
		}
		if got["a"] != a || got["b"] != b {
			t.Errorf("impairments a %q b %q, want %q %q", got["a"], got["b"], a, b)
		}
	}
	imp(`{"loss":100,"endpoint":"a:eth1"}`)
	want("loss 100%", "")
	if err := tryPing(t, e.state, name, "a", "10.0.0.2"); err == nil {
		t.Errorf("a reaches b with 100%% loss on what a sends")
	}
	diff := mustTrellis(t, e.state, "diff", writeTopo(t, file))
	if !strings.Contains(diff, "impairment from a:eth1 loss 100% -> none") {
		t.Errorf("diff after a live impairment does not show it:\n%s", diff)
	}
	imp(`{"duplicate":1,"corrupt":0.5}`)
	want("duplicate 1%, corrupt 0.5%", "duplicate 1%, corrupt 0.5%")
	// A delay needs ports: the link, which names no connector, is re-plugged, and the answer
	// says so and how a file keeps its ports.
	var res struct {
		Replugged string `json:"replugged"`
	}
	json.Unmarshal(s.must(200, "PUT", "/networks/"+name+"/links/"+link+"/impairments", "application/json", `{"delay":"1ms"}`), &res)
	for _, w := range []string{"link " + link + ": a:eth1, b:eth1 to ports re-plugged", "`connector: shortbridge` in the file keeps its ports"} {
		if !strings.Contains(res.Replugged, w) {
			t.Errorf("a delay set through the API answered replugged %q, want it to say %q", res.Replugged, w)
		}
	}
	imp(`{}`)
	want("", "")
	pingEventually(t, e.state, name, "a", "10.0.0.2")
	s.must(404, "PUT", "/networks/"+name+"/links/"+link+"/impairments", "application/json", `{"loss":1,"endpoint":"c:eth1"}`)
	s.must(404, "PUT", "/networks/"+name+"/links/nolink/impairments", "application/json", `{"loss":1}`)

	mustTrellis(t, e.state, "link", name, link, "set", "loss=10% 25%", "--endpoint", "b:eth1")
	want("", "loss 10%, correlation 25%")
	if out := mustTrellis(t, e.state, "link", name); !strings.Contains(out, "loss 10%, correlation 25%") {
		t.Errorf("trellis link lists no impairment:\n%s", out)
	}
	if _, stderr, err := trellis(t, e.state, "link", name, link, "set", "loss=5"); err == nil || !strings.Contains(stderr, "not a percentage") {
		t.Errorf("link set loss=5: %v %s", err, stderr)
	}
	mustTrellis(t, e.state, "up", writeTopo(t, file)) // the file's (none) again
	want("", "")

	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}
