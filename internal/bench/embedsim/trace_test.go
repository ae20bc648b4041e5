package embedsim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
)

const smallTrace = `{"substrate": {"nodes": [{"id": 0, "cpu": 73}, {"id": 1, "cpu": 50}, {"id": 2, "cpu": 60}],
  "links": [{"a": 0, "b": 1, "bw": 88}, {"a": 1, "b": 2, "bw": 30}]},
 "requests": [
  {"id": 0, "arrival": 12, "lifetime": 350, "nodes": [{"cpu": 5}, {"cpu": 7}], "links": [{"a": 0, "b": 1, "bw": 20}]},
  {"id": 1, "arrival": 13, "lifetime": 10, "nodes": [{"cpu": 60}, {"cpu": 60}], "links": [{"a": 0, "b": 1, "bw": 20}]},
  {"id": 2, "arrival": 20, "lifetime": 10, "nodes": [{"cpu": 1}, {"cpu": 1}, {"cpu": 1}], "links": [{"a": 0, "b": 1, "bw": 70}, {"a": 1, "b": 2, "bw": 20}]}
 ]}`

func TestTraceReplay(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "small.json")
	if err := os.WriteFile(path, []byte(smallTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{Traces: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		// Request 1 needs 60 CPU on two nodes: only node 0 has it. Requests 0 and 2 fit
		// (2 needs 70 bandwidth next to 20: only on link 0-1 beside request 0's 20 on it).
		if r.Workload != "trace:small" || r.Requests != 3 || r.Accepted != 2 {
			t.Errorf("%s: %+v", r.Algorithm, r)
		}
	}
}

func TestTraceRoundTrip(t *testing.T) {
	w := DefaultWX100()
	w.Requests = 20
	in := w.Generate(42)
	path := filepath.Join(t.TempDir(), "t.json")
	if err := WriteTrace(path, in); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Sub, in.Sub) || !reflect.DeepEqual(back.Requests, in.Requests) || back.Problem != pe.VNE {
		t.Fatal("trace does not read back as written")
	}
}

func TestBadTraces(t *testing.T) {
	tests := []struct {
		name, trace, want string
	}{
		{"syntax", `{"substrate": {"nodes": [{"cpu": 1}]`, "line 1"},
		{"type", "{\"substrate\": {\"nodes\": [{\"cpu\": \"many\"}]}}", "field substrate.nodes.cpu"},
		{"unknown field", `{"substrate": {"nodes": [{"cpu": 1, "gpu": 2}]}}`, `unknown field "gpu"`},
		{"no nodes", `{"substrate": {"nodes": []}, "requests": []}`, "substrate.nodes: missing"},
		{"id order", `{"substrate": {"nodes": [{"id": 1, "cpu": 1}]}}`, "substrate.nodes[0].id"},
		{"link end", `{"substrate": {"nodes": [{"cpu": 1}, {"cpu": 1}], "links": [{"a": 0, "b": 2, "bw": 1}]}}`, "substrate.links[0].b"},
		{"negative bw", `{"substrate": {"nodes": [{"cpu": 1}, {"cpu": 1}], "links": [{"a": 0, "b": 1, "bw": -1}]}}`, "substrate.links[0].bw"},
		{"arrival order", `{"substrate": {"nodes": [{"cpu": 1}]}, "requests": [
			{"arrival": 5, "lifetime": 1, "nodes": [{"cpu": 1}]}, {"arrival": 4, "lifetime": 1, "nodes": [{"cpu": 1}]}]}`, "requests[1].arrival"},
		{"lifetime", `{"substrate": {"nodes": [{"cpu": 1}]}, "requests": [{"arrival": 5, "lifetime": 0, "nodes": [{"cpu": 1}]}]}`, "requests[0].lifetime"},
		{"request link", `{"substrate": {"nodes": [{"cpu": 1}]}, "requests": [{"arrival": 5, "lifetime": 1, "nodes": [{"cpu": 1}], "links": [{"a": 0, "b": 3, "bw": 1}]}]}`, "requests[0].links[0].b"},
		{"problem", `{"problem": "tsp", "substrate": {"nodes": [{"cpu": 1}]}}`, "problem:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTrace([]byte(tt.trace))
			if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrTrace naming %q", err, tt.want)
			}
		})
	}
	_, err := ReadTrace(filepath.Join(t.TempDir(), "none.json"))
	if err == nil {
		t.Fatal("missing file read")
	}
}
