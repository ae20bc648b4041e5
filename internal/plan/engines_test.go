package plan_test

import (
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// A node with engines gets a device name per engine and link interface, kept by the record's
// names when the file is made again; its ports are marked for the classifier, others are not.
func TestEngineNames(t *testing.T) {
	doc := `name: e
nodes:
  a:
  r:
    engines: 2
  b:
links:
  - endpoints: [a:eth1, r:eth1]
  - endpoints: [r:eth2, b:eth1]
`
	n, err := spec.Parse("e.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	names := &plan.Names{}
	p, err := plan.Make(n, "scope", "", names)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Node("r")
	if len(r.FEPorts) != 2 || len(r.FEPorts[0]) != 2 || len(r.FEPorts[1]) != 2 {
		t.Fatalf("FEPorts = %v; want 2 engines × 2 interfaces", r.FEPorts)
	}
	seen := map[string]bool{}
	for _, m := range r.FEPorts {
		for _, dev := range m {
			if plan.DeviceKind(dev) != 'e' || plan.DeviceNetID(dev) != p.NetID || seen[dev] {
				t.Errorf("engine device %q: kind %q, net id %q, or given twice", dev, plan.DeviceKind(dev), plan.DeviceNetID(dev))
			}
			seen[dev] = true
		}
	}
	if len(p.Node("a").FEPorts) != 0 {
		t.Errorf("node a without engines has FEPorts %v", p.Node("a").FEPorts)
	}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Classify != (port.Node == "r") {
				t.Errorf("port %s: Classify %v", port, port.Classify)
			}
		}
	}
	names.Keep(p)
	again, err := plan.Make(n, "scope", "", names.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.Node("r").FEPorts[1]["eth2"], r.FEPorts[1]["eth2"]; got != want {
		t.Errorf("made again: engine 1's eth2 is %s, was %s", got, want)
	}
}
