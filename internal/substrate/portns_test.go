package substrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

func TestPortNSWanted(t *testing.T) {
	for _, c := range []struct {
		value      string
		want, must bool
		wantErr    bool
	}{
		{"", false, false, false}, // the default: root
		{"auto", true, false, false},
		{"network", true, true, false},
		{"root", false, false, false},
		{"yes", false, false, true},
		{"Network", false, false, true},
	} {
		want, must, err := portNSWanted(Options{PortNS: c.value})
		if want != c.want || must != c.must || (err != nil) != c.wantErr {
			t.Errorf("PortNS %q: %v, %v, %v; want %v, %v, error %v", c.value, want, must, err, c.want, c.must, c.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), PortNSEnv) || !strings.Contains(err.Error(), "--port-netns")) {
			t.Errorf("the error %q does not name --port-netns and %s", err, PortNSEnv)
		}
	}
}

func TestPortNSRefusal(t *testing.T) {
	node := func(kind string) *plan.Node { return &plan.Node{Node: &spec.Node{Name: "a", Kind: kind}} }
	link := func(im spec.Impairment) *plan.Link {
		return &plan.Link{Name: "a:eth1--b:eth1", Ports: []plan.Port{{Node: "a", Ifname: "eth1", Impair: im}}}
	}
	engines := node("container")
	engines.FEPorts = []map[string]string{{"eth1": "tr000001e0"}}
	dp := node("container")
	dp.Node.Dataplane = &spec.Dataplane{}
	for _, c := range []struct {
		name string
		p    *plan.Plan
		want string // in the refusal; "" for none
	}{
		{"plain", &plan.Plan{Nodes: []*plan.Node{node("container")}, Links: []*plan.Link{link(spec.Impairment{Loss: 10})}}, ""},
		{"tunnel", &plan.Plan{Tunnel: "egre"}, "tunnel egre"},
		{"vm", &plan.Plan{Nodes: []*plan.Node{node("vm")}}, "of kind vm"},
		{"engines", &plan.Plan{Nodes: []*plan.Node{engines}}, "engines"},
		{"dataplane", &plan.Plan{Nodes: []*plan.Node{dp}}, "eBPF data plane"},
		{"delay", &plan.Plan{Nodes: []*plan.Node{node("container")}, Links: []*plan.Link{link(spec.Impairment{Delay: time.Millisecond})}}, "delay at a:eth1"},
	} {
		err := portNSRefusal(c.p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrPortNSUnsupported)):
			t.Errorf("%s: %v; want a refusal naming %q", c.name, err, c.want)
		}
	}
}

// TestPortsPlace: a network keeps where its ports are; only the apply that creates a network
// makes a port namespace, where nothing refuses it; "network" (must) refuses rather than
// putting the ports in the root namespace.
func TestPortsPlace(t *testing.T) {
	p := &plan.Plan{Network: "net", NetID: "000001"}
	refused := fmt.Errorf("tunnel egre: %w", ErrPortNSUnsupported)
	for _, c := range []struct {
		name               string
		has, mayMake, must bool
		refusal            error
		want               bool
		wantErr            string // in the error; "" for none
	}{
		{"new network", false, true, false, nil, true, ""},
		{"new network, must", false, true, true, nil, true, ""},
		{"new network with a tunnel", false, true, false, refused, false, ""},
		{"new network with a tunnel, must", false, true, true, refused, false, "--port-netns network"},
		{"an older trellis's network, or root", false, false, false, nil, false, ""},
		{"a change of a root network adds a tunnel", false, false, true, refused, false, ""},
		{"a network in its namespace", true, false, false, nil, true, ""},
		{"a network in its namespace, created again", true, true, false, nil, true, ""},
		{"a network in its namespace gets a tunnel", true, false, false, refused, false, "take the network down and up again with --port-netns root"},
	} {
		got, err := portsPlace(p, c.has, c.mayMake, c.must, c.refusal)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrPortNSUnsupported)):
			t.Errorf("%s: %v; want an error naming %q", c.name, err, c.wantErr)
		case got != c.want:
			t.Errorf("%s: in a port namespace %v, want %v", c.name, got, c.want)
		}
	}
}
