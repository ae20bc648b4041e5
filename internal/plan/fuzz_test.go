package plan_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// FuzzPlan feeds arbitrary topology files through the spec and plan layers: a file that
// validates must plan for every one of its machines (or be refused with a file, line and field,
// before anything is made), and the plan must be one the substrate can build: device names that
// fit the kernel's limit and are unique, every port on a node of the plan, MTUs in range.
func FuzzPlan(f *testing.F) {
	examples, _ := filepath.Glob("../../examples/*/*.yaml")
	for _, path := range examples {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(spread))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := spec.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		hosts := []string{""}
		if len(n.Hosts) > 0 {
			hosts = nil
			for _, h := range n.Hosts {
				hosts = append(hosts, h.Name)
			}
		}
		for _, host := range hosts {
			names := &plan.Names{}
			p, err := plan.Make(n, "scope", host, names)
			var se *spec.Error
			if err != nil && !errors.As(err, &se) {
				t.Fatalf("a valid file failed to plan for host %q without naming where: %v\n%s", host, err, data)
			}
			if err != nil {
				continue
			}
			checkPlan(t, p)
			again, err := plan.Make(n, "scope", host, names)
			if err != nil || len(names.IDs) == 0 && len(p.Links) > 0 {
				t.Fatalf("planning again: %v", err)
			}
			for i, l := range again.Links {
				if l.Device != p.Links[i].Device {
					t.Fatalf("planning the same file again renamed link %s: %s -> %s", l.Name, p.Links[i].Device, l.Device)
				}
			}
		}
	})
}

func checkPlan(t *testing.T, p *plan.Plan) {
	t.Helper()
	seen := map[string]bool{}
	device := func(name string) {
		if name == "" {
			return
		}
		if len(name) > 15 || seen[name] || plan.DeviceNetID(name) != p.NetID {
			t.Fatalf("device name %q: too long, used twice or not the network's", name)
		}
		seen[name] = true
	}
	for _, l := range p.Links {
		device(l.Device)
		if l.MTU != 0 && (l.MTU < 68 || l.MTU > 65535) {
			t.Fatalf("link %s: MTU %d", l.Name, l.MTU)
		}
		for _, port := range l.Ports {
			device(port.Name)
			if p.Node(port.Node) == nil {
				t.Fatalf("link %s: port on node %s, which the plan does not hold", l.Name, port.Node)
			}
		}
		tunnelDevs := map[string]bool{}
		for _, tn := range l.Tunnels {
			if !tunnelDevs[tn.Device] {
				device(tn.Device)
				tunnelDevs[tn.Device] = true
			}
			device(tn.Encap)
		}
	}
}
