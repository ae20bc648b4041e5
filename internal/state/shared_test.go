package state

import (
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
)

// TestLoadShared: the record decoded once is returned again while its file stays the same; a
// saved record, an interrupted change and a deleted record are seen at once.
func TestLoadShared(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.LoadShared("net"); r != nil || err != nil {
		t.Fatalf("LoadShared of a missing network: %v, %v", r, err)
	}
	save := func(file string) {
		if err := s.Save(&Record{Name: "net", NetID: "abc123", Status: Up, File: file, Plan: &plan.Plan{Network: "net"}}); err != nil {
			t.Fatal(err)
		}
	}
	save("one.yaml")
	first, err := s.LoadShared("net")
	if err != nil || first == nil || first.File != "one.yaml" {
		t.Fatalf("LoadShared: %+v, %v", first, err)
	}
	if again, _ := s.LoadShared("net"); again != first {
		t.Errorf("the file did not change, but the record was decoded again")
	}
	save("two.yaml") // same size: a new file all the same
	if r, _ := s.LoadShared("net"); r == first || r.File != "two.yaml" {
		t.Errorf("after Save: %+v, want the saved record", r)
	}
	if err := s.MarkChanging("net"); err != nil {
		t.Fatal(err)
	}
	r, _ := s.LoadShared("net")
	if r.Status != Changing {
		t.Errorf("status with a change interrupted: %s, want %s", r.Status, Changing)
	}
	if kept := shared.recs[s.path("net")]; kept == nil || kept.rec.Status != Up {
		t.Errorf("the kept record was changed, or not kept: %+v", kept)
	}
	if err := s.Delete("net"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.LoadShared("net"); r != nil || err != nil {
		t.Errorf("after Delete: %+v, %v", r, err)
	}
}
