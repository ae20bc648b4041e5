//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
)

// collidingNames finds two network names whose ids, as derived from the names in the state
// directory of id scope, are the same (24 bits: a few thousand names on average).
func collidingNames(t *testing.T, scope string) (string, string) {
	t.Helper()
	seen := map[string]string{}
	prefix := "nid" + nonce()[:4] + "-"
	for i := 0; i < 1<<22; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		id := plan.NetID(scope, name)
		if other, ok := seen[id]; ok {
			return other, name
		}
		seen[id] = name
	}
	t.Fatal("no two names with one derived network id in 4 million")
	return "", ""
}

// TestNetIDNotBlocked: a network whose name derives the id of another network of the machine
// (as a tenant can choose, by trying names) is created all the same, with an id of its own,
// and both forward; before, the second was refused ("derives the same device names"), so one
// tenant's name could keep another tenant's network off a machine.
func TestNetIDNotBlocked(t *testing.T) {
	e := start(t)
	mustTrellis(t, e.state, "ls") // makes the state directory and its id
	scope, err := os.ReadFile(filepath.Join(e.state, "id"))
	if err != nil {
		t.Fatal(err)
	}
	first, second := collidingNames(t, strings.TrimSpace(string(scope)))
	ids := map[string]string{}
	for _, name := range []string{first, second} {
		registerNetwork(name)
		path := writeTopo(t, fmt.Sprintf(`name: %s
nodes:
  a: {addresses: {eth1: [10.0.0.1/24]}}
  b: {addresses: {eth1: [10.0.0.2/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
`, name))
		if _, errOut, err := trellis(t, e.state, "up", path); err != nil {
			t.Fatalf("up of %s (its name derives the id of %s): %v\n%s", name, first, err, errOut)
		}
		var info struct {
			NetID string `json:"netid"`
		}
		out := mustTrellis(t, e.state, "inspect", name, "--json")
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatal(err)
		}
		ids[name] = info.NetID
	}
	if ids[first] == ids[second] || ids[first] != plan.NetID(strings.TrimSpace(string(scope)), first) {
		t.Errorf("network ids %v: want the first network's derived id, and another for the second", ids)
	}
	for _, name := range []string{first, second} {
		ping(t, e.state, name, "a", "10.0.0.2")
	}
	mustTrellis(t, e.state, "down", first, second)
	e.assertClean()
}
