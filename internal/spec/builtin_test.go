package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The kinds trellis registers (internal/kinds/*), registered here for the spec tests, which
// cannot import those packages (they import spec).
func init() {
	RegisterNodeKind(DefaultNodeKind, NodeKind{Impl: takesKeys{KeyRootfs: {}, KeyImage: {}, KeyEnv: {}, KeyEngines: {}, KeyDataplane: {}}})
	RegisterNodeKind("vm", NodeKind{Settings: stubSettings, DefaultMemory: 512 << 20, Impl: refusesKeys{KeyEngines: {},
		KeyRootfs: {"a vm node boots its own disk, not a directory", "remove `rootfs:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"},
		KeyImage:  {"a vm node boots its own disk, not a container image", "remove `image:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"},
	}})
	RegisterLinkKind(Shortbridge, LinkKind{MinEndpoints: 2, MaxEndpoints: 2})
	RegisterLinkKind(Bridge, LinkKind{MinEndpoints: 2})
	RegisterLinkKind(LAN, LinkKind{MinEndpoints: 2, MaxEndpoints: 4096, Settings: &LinkSettings{Keys: []string{"table", "ageing"},
		What:  "a setting of the lan connector's forwarding table",
		Parse: func(*Reader) Settings { return &struct{}{} }, // kinds/lan reads and tests the real ones
		New:   func() Settings { return &struct{}{} }}})
	// Inner Ethernet header, outer IPv4, GRE with a key.
	RegisterTunnelKind(EGRE, TunnelKind{Overhead: 14 + 20 + 8})
	// Inner Ethernet header, outer IPv4, UDP, VXLAN.
	RegisterTunnelKind(VXLAN, TunnelKind{Overhead: 14 + 20 + 8 + 8})
}

// takesKeys is a Taker that takes the keys it holds.
type takesKeys map[string]struct{}

func (t takesKeys) Takes(key string) (bool, Refusal) {
	_, ok := t[key]
	return ok, Refusal{}
}

// refusesKeys is a Taker that takes the keys it holds with a zero refusal and refuses the others
// with theirs (the general refusal for those it does not hold).
type refusesKeys map[string]Refusal

func (t refusesKeys) Takes(key string) (bool, Refusal) {
	why, held := t[key]
	return held && why == (Refusal{}), why
}

// stubSettings stands for the vm kind's settings (kinds/vm reads and tests the real ones): the
// values of a mapping's keys.
var stubSettings = &NodeSettings{Key: "vm", What: "VM settings",
	Parse: func(r *Reader, v *yaml.Node) Settings {
		if v.Kind != yaml.MappingNode {
			r.Fail(v, r.Field, "expected a mapping of keys to values", "see the topology file reference in README.md")
			return nil
		}
		s := map[string]string{}
		for i := 0; i+1 < len(v.Content); i += 2 {
			s[v.Content[i].Value] = v.Content[i+1].Value
		}
		return &s
	},
	New: func() Settings { return &map[string]string{} },
}

// wantErrors checks that err is a spec.Errors whose messages, without the file name topo, are
// want in order.
func wantErrors(t *testing.T, err error, topo string, want []string) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v, want spec.Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, strings.TrimPrefix(e.Error(), topo))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}
