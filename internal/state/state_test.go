package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
)

func TestStoreRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "st")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ID) != 8 {
		t.Fatalf("id %q, want 8 hex digits", s.ID)
	}
	again, err := Open(dir)
	if err != nil || again.ID != s.ID {
		t.Fatalf("reopened id %q (%v), want %q: the id must be stable", again.ID, err, s.ID)
	}
	if r, err := s.Load("none"); r != nil || err != nil {
		t.Fatalf("Load of a missing network: %v, %v", r, err)
	}
	for _, name := range []string{"b", "a"} {
		r := &Record{Name: name, NetID: "abc123", Status: Creating, Plan: &plan.Plan{Network: name}, Nodes: map[string]int{"n1": 42}}
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].Name != "a" || list[1].Nodes["n1"] != 42 {
		t.Fatalf("List: %v %+v", err, list)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Load("a"); r != nil {
		t.Fatal("record still there after Delete")
	}
}

func TestLockIsExclusive(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock("net")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock("net"); err == nil {
		t.Fatal("a second lock of the same network was granted")
	}
	if other, err := s.Lock("other"); err != nil {
		t.Fatalf("another network's lock: %v", err)
	} else {
		other()
	}
	unlock()
	relock, err := s.Lock("net")
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	relock()
	if err := s.Delete("net"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "networks", "net.lock")); !os.IsNotExist(err) {
		t.Fatalf("lock file left after Delete: %v", err)
	}
}

// A network marked as changing loads as changing until it is saved as up again.
func TestMarkChanging(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{Name: "n", NetID: "abcdef", Status: Up}
	if err := st.Save(r); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkChanging("n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Load("n"); got == nil || got.Status != Changing {
		t.Fatalf("after MarkChanging, Load gives %+v, want status %s", got, Changing)
	}
	if err := st.Save(r); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Load("n"); got == nil || got.Status != Up {
		t.Fatalf("after Save as up, Load gives %+v, want status %s", got, Up)
	}
	st.MarkChanging("n")
	if err := st.Delete("n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Load("n"); got != nil {
		t.Errorf("after Delete, Load gives %+v", got)
	}
}
