package substrate

import (
	"testing"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/state"
)

// A node whose start commands an interrupted apply began is started again; the others, and a
// node of the list that does not run, are left as they are.
func TestRestartUnfinished(t *testing.T) {
	running := map[string]kinds.Instance{
		"h1": {Name: "h1", PID: 10, Digest: "d1"},
		"s1": {Name: "s1", PID: 11, Digest: "d2"},
	}
	restartUnfinished(running, &state.Record{Starting: []string{"h1", "gone"}})
	if running["h1"].Digest != kinds.PartGone {
		t.Errorf("h1, whose start commands did not finish, keeps digest %q", running["h1"].Digest)
	}
	if running["s1"].Digest != "d2" {
		t.Errorf("s1 changed: %q", running["s1"].Digest)
	}
	if _, ok := running["gone"]; ok || len(running) != 2 {
		t.Errorf("a node that does not run was added: %v", running)
	}
	restartUnfinished(running, nil) // no record: nothing to do
}
