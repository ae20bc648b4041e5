//go:build !integration

package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// A tunnel kind with settings of its own, as a newcomer adds one: in the product it would be
// internal/kinds/exampletunnel/exampletunnel.go, everything below but the tests, and one import
// line in internal/kinds/all. Its settings are keys of the file's `tunnel:` beside `kind:`
// (`tunnel: {kind: example-tunnel, port: 4790}`); spec reads them with its parser, keeps them
// in the network and the plan, and its Ensure reads them back from the plan.

const exampleTunnelName = "example-tunnel"

// exampleTunnelSettings are the kind's settings; a file that gives none of its keys gives none
// (nil), which is the defaults.
type exampleTunnelSettings struct {
	Port int `json:",omitempty"`
}

// defaultPort is the port without `port:`.
const defaultPort = 4789

func init() {
	kinds.RegisterTunnel(exampleTunnelName, &exampleTunnel{}, spec.TunnelKind{Overhead: 50,
		Settings: &spec.TunnelSettings{Keys: []string{"port"}, What: "a setting of the example-tunnel tunnel", Parse: parseExampleTunnel,
			New: func() spec.Settings { return &exampleTunnelSettings{} }}})
	// A tunnel kind without settings, to refuse `port:` on, and a connector for the links.
	kinds.RegisterTunnel("plain-tunnel", &exampleTunnel{}, spec.TunnelKind{})
	spec.RegisterLinkKind("example-connector", spec.LinkKind{MinEndpoints: 2, MaxEndpoints: 2})
}

// parseExampleTunnel reads `port: N` of `tunnel:`.
func parseExampleTunnel(r *spec.Reader) spec.Settings {
	s := &exampleTunnelSettings{Port: defaultPort}
	if v := r.Sibling("port"); v != nil {
		text, _ := r.Str(v, r.Field+".port")
		if n, err := strconv.Atoi(text); err != nil || n < 1 || n > 65535 {
			r.Fail(v, r.Field+".port", fmt.Sprintf("%q is not a UDP port", text), "give a whole number from 1 to 65535, e.g. 4790")
		} else {
			s.Port = n
		}
	}
	return s
}

// exampleTunnel makes no device: Ensure notes the port it would use.
type exampleTunnel struct{ port int }

func (k *exampleTunnel) Ensure(_ context.Context, env *kinds.Env, _ *plan.Link, _ []netlink.Link, _ bool) (kinds.Members, error) {
	k.port = defaultPort
	if s, ok := env.Plan.TunnelKindSettings().(*exampleTunnelSettings); ok {
		k.port = s.Port
	}
	return kinds.Members{}, nil
}

func (k *exampleTunnel) Remove(context.Context, *kinds.Env, *plan.Link) error { return nil }

const exampleTunnelDoc = `name: t
hosts: {m1: {address: 198.18.0.1}, m2: {address: 198.18.0.2}}
tunnel: TUNNEL
nodes:
  a: {kind: example, example: {greeting: hi}, host: m1}
  b: {kind: example, example: {greeting: hi}, host: m2}
links:
  - endpoints: [a:eth1, b:eth1]
    connector: example-connector
`

// examplePlan is the plan of m1 for the file with tunnel: tunnel.
func examplePlan(t *testing.T, tunnel string) *plan.Plan {
	t.Helper()
	p, err := plan.Make(exampleNetwork(t, tunnel), "scope", "m1", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exampleNetwork parses the example topology with `tunnel: TUNNEL`.
func exampleNetwork(t *testing.T, tunnel string) *spec.Network {
	t.Helper()
	n, err := spec.Parse("topo.yaml", []byte(strings.Replace(exampleTunnelDoc, "TUNNEL", tunnel, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExampleTunnelKind: the tunnel kind's settings parse from YAML with their defaults, reach
// its Ensure through the plan, survive the record's JSON, and a change of them is a change of
// the network's tunnels (plan.SameTunnel), as a change of kind is.
func TestExampleTunnelKind(t *testing.T) {
	k, err := kinds.TunnelKind(exampleTunnelName)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tunnel string
		want   int
	}{{"{kind: example-tunnel, port: 4790}", 4790}, {"{kind: example-tunnel}", defaultPort}, {"example-tunnel", defaultPort}} {
		p := examplePlan(t, c.tunnel)
		if _, err := k.Ensure(context.Background(), &kinds.Env{Plan: p}, p.Links[0], nil, false); err != nil {
			t.Fatal(err)
		}
		if got := k.(*exampleTunnel).port; got != c.want {
			t.Errorf("tunnel: %s: Ensure used port %d, want %d", c.tunnel, got, c.want)
		}
	}
	p := examplePlan(t, "{kind: example-tunnel, port: 4790}")
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var recorded plan.Plan
	if err := json.Unmarshal(data, &recorded); err != nil {
		t.Fatal(err)
	}
	if s, _ := recorded.TunnelKindSettings().(*exampleTunnelSettings); s == nil || s.Port != 4790 || !recorded.SameTunnel(p) {
		t.Errorf("recorded plan's tunnel settings %+v (same tunnel: %v), want port 4790", s, recorded.SameTunnel(p))
	}
	for _, other := range []string{"{kind: example-tunnel, port: 4791}", "example-tunnel", "plain-tunnel"} {
		if recorded.SameTunnel(examplePlan(t, other)) {
			t.Errorf("tunnel: %s is the same tunnel as port 4790", other)
		}
	}
	// A cluster's diff lists the change of settings, as it does a change of kind.
	for _, c := range []struct{ from, to, want string }{
		{"{kind: example-tunnel, port: 4790}", "{kind: example-tunnel, port: 4791}", "~ tunnel example-tunnel: settings changed"},
		{"{kind: example-tunnel, port: 4790}", "{kind: example-tunnel, port: 4790}", ""},
		{"example-tunnel", "plain-tunnel", "~ tunnel example-tunnel -> plain-tunnel"},
	} {
		if got := strings.Join(cluster.DiffSpecs(exampleNetwork(t, c.from), exampleNetwork(t, c.to)), "\n"); got != c.want {
			t.Errorf("DiffSpecs, tunnel %s -> %s: %q, want %q", c.from, c.to, got, c.want)
		}
	}
}

// TestExampleTunnelKindErrors: what is wrong with the tunnel kind's settings is reported at its
// line and field, and its settings with another tunnel kind are refused.
func TestExampleTunnelKindErrors(t *testing.T) {
	for _, c := range []struct{ tunnel, want string }{
		{"{kind: example-tunnel, port: many}", `topo.yaml:3: tunnel.port: "many" is not a UDP port; give a whole number from 1 to 65535, e.g. 4790`},
		{"{kind: plain-tunnel, port: 4790}", "topo.yaml:3: tunnel.port: port is a setting of the example-tunnel tunnel, and this network's tunnel is plain-tunnel; remove port, or give the file `tunnel: {kind: example-tunnel}`"},
		{"{kind: example-tunnel, colour: red}", "topo.yaml:3: tunnel.colour: unknown key; the keys allowed here are [kind port]"},
		{"{kind: nope}", `topo.yaml:3: tunnel: unknown tunnel "nope"; use one of: example-tunnel, plain-tunnel`},
	} {
		_, err := spec.Parse("topo.yaml", []byte(strings.Replace(exampleTunnelDoc, "TUNNEL", c.tunnel, 1)))
		if err == nil || err.Error() != c.want {
			t.Errorf("tunnel: %s: errors\n%v\nwant\n%s", c.tunnel, err, c.want)
		}
	}
}
