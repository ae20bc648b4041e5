package vm

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// TestDigestsUnchanged: a VM's digest (plan.Digest, which decides restarts) is what it was when
// the settings were a field of spec.Node (5ddc709): moving them into the kind restarts no
// running VM. And a node read back from a record (JSON) has the same settings and digest.
func TestDigestsUnchanged(t *testing.T) {
	for _, c := range []struct{ doc, digest string }{
		{"name: t\nnodes:\n  v:\n    kind: vm\n    memory: 512M\n", "32cbfa224914"},
		{"name: t\nnodes:\n  v:\n    kind: vm\n    memory: 512M\n    vm: {}\n", "0426ff81c89e"},
		{"name: t\nnodes:\n  v:\n    kind: vm\n    memory: 512M\n    vm:\n      pin: {vcpu: [0], io: 0}\n      priority: {io: 5}\n" +
			"      reserve: 40% 20ms\n      queues: 2\n      queue_size: 512\n      interconnect: macvtap\n      append: quiet\n", "8cd3aa98e3db"},
	} {
		n, err := spec.Parse("/tmp/t.yaml", []byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		nd := n.Nodes[0]
		if got := plan.Digest(nd); got != c.digest {
			t.Errorf("digest %s, want %s (5ddc709's) of\n%s", got, c.digest, c.doc)
		}
		data, err := json.MarshalIndent(&plan.Node{Node: nd}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var back plan.Node
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if got, want := knobs(back.Node), knobs(nd); !reflect.DeepEqual(got, want) {
			t.Errorf("settings read back from JSON: %+v, want %+v", got, want)
		}
		if got := plan.Digest(back.Node); got != c.digest {
			t.Errorf("digest of the node read back from JSON %s, want %s", got, c.digest)
		}
	}
}
