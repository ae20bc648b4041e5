package vm_test

import (
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all"
	"github.com/trellisnet/trellis/internal/kinds/vm"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// The digest of a VM node with engines (the kind's NodeDigest) covers how many engines and its link interfaces'
// addresses (its engine VMs copy them at boot); a container node's does not (its engines change
// live).
func TestEngineVMDigests(t *testing.T) {
	const doc = `name: e
nodes:
  a:
    addresses: {eth1: [10.0.1.1/24]}
  r:
    kind: KIND
    engines: N
    dispatch: DISPATCH
    addresses: {eth1: [ADDR]}
links:
  - endpoints: [a:eth1, r:eth1]
`
	digest := func(kind, engines, dispatch, addr string) string {
		t.Helper()
		text := strings.NewReplacer("KIND", kind, "N", engines, "DISPATCH", dispatch, "ADDR", addr).Replace(doc)
		n, err := spec.Parse("e.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Make(n, "scope", "", &plan.Names{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Node("r").Digest
	}
	cases := []struct {
		name       string
		kind       string
		a, b       [3]string // engines, dispatch, address
		wantChange bool
	}{
		{"vm: engines", vm.Name, [3]string{"2", "flow", "10.0.1.2/24"}, [3]string{"3", "flow", "10.0.1.2/24"}, true},
		{"vm: an address", vm.Name, [3]string{"2", "flow", "10.0.1.2/24"}, [3]string{"2", "flow", "10.0.1.3/24"}, true},
		{"vm: dispatch", vm.Name, [3]string{"2", "flow", "10.0.1.2/24"}, [3]string{"2", "round-robin", "10.0.1.2/24"}, false},
		{"container: engines", spec.DefaultNodeKind, [3]string{"2", "flow", "10.0.1.2/24"}, [3]string{"3", "flow", "10.0.1.2/24"}, false},
		{"container: an address", spec.DefaultNodeKind, [3]string{"2", "flow", "10.0.1.2/24"}, [3]string{"2", "flow", "10.0.1.3/24"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := digest(c.kind, c.a[0], c.a[1], c.a[2]), digest(c.kind, c.b[0], c.b[1], c.b[2])
			if (a != b) != c.wantChange {
				t.Errorf("digest %s -> %s; want a change: %v", a, b, c.wantChange)
			}
		})
	}
}
