package substrate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

func TestPortNSWanted(t *testing.T) {
	for _, c := range []struct {
		value   string
		want    bool
		wantErr bool
	}{{"", false, false}, {"root", false, false}, {"network", true, false}, {"yes", false, true}} {
		got, err := portNSWanted(Options{PortNS: c.value})
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("PortNS %q: %v, %v; want %v, error %v", c.value, got, err, c.want, c.wantErr)
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
