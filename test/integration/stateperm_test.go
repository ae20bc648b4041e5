//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateFromLocalUser: a local unprivileged user (nobody) reads nothing of what trellis
// records of a network: not its record (which holds every `files:` content), not a node's log,
// not the state directory's listing, nor the network's entry in the uid range registry
// (docs/security.md, "A local unprivileged user").
func TestStateFromLocalUser(t *testing.T) {
	e := start(t)
	// The test's temporary directories are closed to others: open them, so that only the
	// state directory's own modes keep nobody out.
	for d := filepath.Dir(e.state); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const topo = `name: private
nodes:
  a:
    files:
      - {path: /etc/secret.conf, content: "password hunter2-from-files\n", mode: "0600"}
    exec:
      - echo hunter2-from-output
`
	mustTrellis(t, e.state, "up", writeTopo(t, topo))
	base := strings.TrimSpace(readTrim(filepath.Join(e.state, "uids", "private")))
	registry := os.Getenv("TRELLIS_UID_REGISTRY")
	if registry == "" {
		registry = "/var/lib/trellis-uid-ranges"
	}
	record := filepath.Join(e.state, "networks", "private.json")
	log := filepath.Join(e.state, "logs", "private", "a.log")
	for _, f := range []string{record, log} { // root reads them: the probes below are not vacuous
		if data, err := os.ReadFile(f); err != nil || !strings.Contains(string(data), "hunter2") {
			t.Fatalf("%s: %v, no hunter2 in it:\n%s", f, err, data)
		}
	}
	probes := []struct{ what, cmd, path string }{
		{"read the record", "cat", record},
		{"read a node's log", "cat", log},
		{"list the state directory", "ls", e.state},
		{"list the records", "ls", filepath.Join(e.state, "networks")},
		{"read the uid range registry's entry", "cat", filepath.Join(registry, base)},
	}
	for _, p := range probes {
		out, err := asNobody(t, p.cmd, p.path)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("as nobody, %s (%s %s): %v, want EACCES\n%s", p.what, p.cmd, p.path, err, out)
		}
	}
	mustTrellis(t, e.state, "down", "private")
	e.assertClean()
}
