package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestBuiltinKinds(t *testing.T) {
	for _, tc := range []struct {
		got, want []string
	}{
		{NodeKinds(), []string{"container", "vm"}},
		{LinkKinds(), []string{"bridge", "lan", "shortbridge"}},
		{TunnelKinds(), []string{"egre", "vxlan"}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("registered %v, want %v", tc.got, tc.want)
		}
	}
	for kind, want := range map[string]int{EGRE: 42, VXLAN: 50, "nosuch": 0, "": 0} {
		if got := TunnelOverhead(kind); got != want {
			t.Errorf("TunnelOverhead(%q) = %d, want %d", kind, got, want)
		}
	}
	for _, tc := range []struct {
		kind      string
		count     int
		accepts   bool
		wantBound string
	}{
		{Shortbridge, 2, true, "exactly 2"}, {Shortbridge, 3, false, "exactly 2"},
		{Bridge, 2, true, "2 or more"}, {Bridge, 40, true, "2 or more"},
	} {
		k, ok := LookupLinkKind(tc.kind)
		if !ok || k.accepts(tc.count) != tc.accepts || k.bounds() != tc.wantBound {
			t.Errorf("%s with %d endpoints: found %v, accepts %v (%s); want %v (%s)", tc.kind, tc.count, ok, k.accepts(tc.count), k.bounds(), tc.accepts, tc.wantBound)
		}
	}
	if got := (LinkKind{MinEndpoints: 2, MaxEndpoints: 4}).bounds(); got != "2 to 4" {
		t.Errorf("bounds %q", got)
	}
}

func TestRegisterRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		reg  func()
	}{
		{"node kind twice", func() { RegisterNodeKind(DefaultNodeKind, NodeKind{}) }},
		{"node kind without a name", func() { RegisterNodeKind("", NodeKind{}) }},
		{"link kind twice", func() { RegisterLinkKind(Bridge, LinkKind{MinEndpoints: 2}) }},
		{"link kind for one endpoint", func() { RegisterLinkKind("t-one", LinkKind{MinEndpoints: 1}) }},
		{"link kind with max below min", func() { RegisterLinkKind("t-maxmin", LinkKind{MinEndpoints: 3, MaxEndpoints: 2}) }},
		{"tunnel kind twice", func() { RegisterTunnelKind(EGRE, TunnelKind{}) }},
		{"tunnel kind with negative overhead", func() { RegisterTunnelKind("t-neg", TunnelKind{Overhead: -1}) }},
		{"tunnel kind with settings without keys", func() {
			RegisterTunnelKind("t-nokeys", TunnelKind{Settings: &TunnelSettings{Parse: func(*Reader) Settings { return nil }, New: func() Settings { return nil }}})
		}},
		{"tunnel kind whose settings key is kind", func() {
			RegisterTunnelKind("t-kindkey", TunnelKind{Settings: &TunnelSettings{Keys: []string{"kind"}, Parse: func(*Reader) Settings { return nil }, New: func() Settings { return nil }}})
		}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.reg()
		}()
	}
}

// Kinds registered from outside check their own fields through the spec layer; the spec layer
// checks their endpoint bounds and lists them in messages.
func TestRegisteredKindsCheck(t *testing.T) {
	t.Cleanup(func() {
		nodeKinds.remove("t-vm")
		linkKinds.remove("t-lan")
		tunnelKinds.remove("t-tun")
	})
	RegisterNodeKind("t-vm", NodeKind{Check: func(n *Network, nd *Node) []*Error {
		if len(nd.Exec) > 0 {
			return []*Error{n.NodeError(nd, "exec", "a t-vm runs no commands", "remove exec")}
		}
		return nil
	}})
	RegisterLinkKind("t-lan", LinkKind{MinEndpoints: 3, MaxEndpoints: 4, Check: func(n *Network, l *Link) []*Error {
		if l.Rate != 0 {
			return []*Error{n.LinkError(l, "rate", "a t-lan has no shaper", "remove the rate")}
		}
		return nil
	}})
	RegisterTunnelKind("t-tun", TunnelKind{Overhead: 7, Check: func(n *Network) []*Error {
		if len(n.Hosts) > 1 {
			return []*Error{n.NetworkError("tunnel", fmt.Sprintf("t-tun joins one host, not %d", len(n.Hosts)), "use egre")}
		}
		return nil
	}})
	if TunnelOverhead("t-tun") != 7 {
		t.Errorf("TunnelOverhead(t-tun) = %d", TunnelOverhead("t-tun"))
	}
	checkErrors(t, `name: t
hosts: {m1: {address: 198.18.0.1}, m2: {address: 198.18.0.2}}
tunnel: t-tun
nodes:
  a: {kind: t-vm, exec: [x]}
  b:
  c:
  d:
links:
  - endpoints: [a:eth1, b:eth1, c:eth1]
    connector: t-lan
    rate: 1mbit
  - endpoints: [a:eth2, b:eth2]
    connector: t-lan
  - endpoints: [a:eth3, b:eth3, c:eth3, d:eth3, d:eth4]
    connector: t-lan
  - endpoints: [a:eth5, b:eth5, c:eth5, d:eth5, d:eth6]
    connector: shortbridge
  - endpoints: [a:eth7, b:eth7]
    connector: nope
`, []string{
		"topo.yaml:3: tunnel: t-tun joins one host, not 2; use egre",
		"topo.yaml:5: nodes.a.exec: a t-vm runs no commands; remove exec",
		"topo.yaml:12: links[0].rate: a t-lan has no shaper; remove the rate",
		"topo.yaml:14: links[1].connector: a t-lan joins 3 to 4 endpoints, not 2; use `connector: bridge` or `connector: lan` or `connector: shortbridge`",
		"topo.yaml:16: links[2].connector: a t-lan joins 3 to 4 endpoints, not 5; use `connector: bridge` or `connector: lan`",
		"topo.yaml:18: links[3].connector: a shortbridge joins exactly 2 endpoints, not 5; use `connector: bridge` or `connector: lan`",
		`topo.yaml:20: links[4].connector: unknown connector "nope"; use one of: auto, bridge, lan, shortbridge, t-lan`,
	})
	n, err := Parse("topo.yaml", []byte(`name: t
hosts: {m1: {address: 198.18.0.1}}
tunnel: t-tun
nodes: {a: {kind: t-vm, host: m1}, b: {}, c: {}}
links:
  - endpoints: [a:eth1, b:eth1, c:eth1]
    connector: t-lan
`))
	if err != nil {
		t.Fatal(err)
	}
	if n.Node("a").Kind != "t-vm" || n.Links[0].Connector != "t-lan" || n.Tunnel != "t-tun" {
		t.Errorf("kinds %q %q %q", n.Node("a").Kind, n.Links[0].Connector, n.Tunnel)
	}
}

// remove takes a kind out of the registry again, so that a test's kinds do not leak into the
// others.
func (r *registry[K]) remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.kinds, name)
}

// TestTakes: a node kind's nodes take the keys only some kinds take (rootfs, image, env, engines,
// dataplane) when the kind says so (Taker), and the refusal is the general one unless the kind
// words its own; a kind that is not a Taker takes none.
func TestTakes(t *testing.T) {
	t.Cleanup(func() {
		nodeKinds.remove("t-plain")
		nodeKinds.remove("t-some")
	})
	RegisterNodeKind("t-plain", NodeKind{})
	RegisterNodeKind("t-some", NodeKind{Impl: refusesKeys{KeyEngines: {}, KeyEnv: {}, KeyImage: {"t-some boots no image", "remove it"}}})
	dir := t.TempDir()
	doc := `name: t
nodes:
  a:
    kind: KIND
    rootfs: DIR
    engines: 2
    dataplane: {program: p.o}
  b:
    kind: KIND
    image: alpine
    env: {X: "1"}
links:
  - endpoints: [a:eth1, b:eth1]
`
	root := filepath.Join(dir, "root")
	for _, d := range []string{"dev", "etc", "proc", "run", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	doc = strings.ReplaceAll(doc, "DIR", root)
	if err := os.WriteFile(filepath.Join(dir, "p.o"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind string
		want []string
	}{
		{"t-plain", []string{
			":5: nodes.a.rootfs: a t-plain node takes no rootfs; remove `rootfs:`, or make the node `kind: container`",
			":6: nodes.a.engines: engines need a node of kind container or a VM kind, not t-plain; remove engines, or the node's kind",
			":7: nodes.a.dataplane: a dataplane program needs a node of kind container, not t-plain; remove dataplane, or the node's kind",
			":7: nodes.a.dataplane: a node with a dataplane program forwards with it, not with engines; remove engines or dataplane",
			":10: nodes.b.image: a t-plain node takes no image; remove `image:`, or make the node `kind: container`",
			":11: nodes.b.env: a t-plain node takes no env:; remove `env:`, or set the variables in the exec: lines",
		}},
		{"t-some", []string{
			":5: nodes.a.rootfs: a t-some node takes no rootfs; remove `rootfs:`, or make the node `kind: container`",
			":7: nodes.a.dataplane: a dataplane program needs a node of kind container, not t-some; remove dataplane, or the node's kind",
			":7: nodes.a.dataplane: a node with a dataplane program forwards with it, not with engines; remove engines or dataplane",
			":10: nodes.b.image: t-some boots no image; remove it",
		}},
	} {
		path := filepath.Join(dir, "topo.yaml")
		_, err := Parse(path, []byte(strings.ReplaceAll(doc, "KIND", c.kind)))
		wantErrors(t, err, path, c.want)
	}
}

// TestTunnelMapping: `tunnel: {kind: K}` is `tunnel: K`, and without kind the default; a key no
// tunnel kind registered is refused.
func TestTunnelMapping(t *testing.T) {
	const doc = "name: t\nhosts: {m1: {address: 198.18.0.1}, m2: {address: 198.18.0.2}}\ntunnel: TUNNEL\nnodes: {a: {host: m1}, b: {host: m2}}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n"
	for _, c := range []struct{ tunnel, want string }{{"vxlan", VXLAN}, {"{kind: vxlan}", VXLAN}, {"{}", DefaultTunnel}} {
		n, err := Parse("topo.yaml", []byte(strings.Replace(doc, "TUNNEL", c.tunnel, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if n.Tunnel != c.want || n.TunnelSettings != nil {
			t.Errorf("tunnel: %s: %q with settings %v, want %q and none", c.tunnel, n.Tunnel, n.TunnelSettings, c.want)
		}
	}
	_, err := Parse("topo.yaml", []byte(strings.Replace(doc, "TUNNEL", "{kind: vxlan, port: 1}", 1)))
	if want := "topo.yaml:3: tunnel.port: unknown key; the keys allowed here are [kind]"; err == nil || err.Error() != want {
		t.Errorf("errors %v, want %s", err, want)
	}
}
