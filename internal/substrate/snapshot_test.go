package substrate

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
)

func TestSnapshotDevicesByNetwork(t *testing.T) {
	s := snapshotOf(time.Now(), []string{"lo", "eth0", "tr0000aap1", "tr0000aab2", "tr0000bbp1", "trx", "tr0000aae10"})
	tests := []struct {
		net  string
		want []string
	}{
		{"0000aa", []string{"tr0000aap1", "tr0000aab2", "tr0000aae10"}},
		{"0000bb", []string{"tr0000bbp1"}},
		{"0000cc", nil},
	}
	for _, tt := range tests {
		got := s.devices(tt.net)
		if len(got) != len(tt.want) {
			t.Fatalf("devices(%s) = %v, want %v", tt.net, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("devices(%s) = %v, want %v", tt.net, got, tt.want)
			}
		}
	}
}

// An apply handed a snapshot finds its network's devices there, and lists nothing.
func TestListDevicesUsesSnapshot(t *testing.T) {
	s := snapshotOf(time.Now(), []string{"tr0000aap1", "tr0000aab2", "tr0000bbp1"})
	a := &applier{env: &kinds.Env{Plan: &plan.Plan{NetID: "0000aa"}}}
	if err := a.listDevices(WithSnapshot(context.Background(), s)); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"tr0000aap1": true, "tr0000aab2": true}
	if !maps.Equal(a.known, want) || !a.listed {
		t.Fatalf("known %v listed %v, want %v listed", a.known, a.listed, want)
	}
	if SnapshotFrom(context.Background()) != nil || SnapshotFrom(WithSnapshot(context.Background(), nil)) != nil {
		t.Fatal("a context without a snapshot gave one")
	}
}

func TestNetsIn(t *testing.T) {
	const st = "5f3a9c"
	tests := []struct {
		name    string
		cmdline string
		want    []string
	}{
		{"node init", "trellis-node-init\x005f3a9c\x00ab12cd\x00r1\x00d1g3st\x00", []string{"ab12cd"}},
		{"VM", "/usr/bin/qemu-system-x86_64\x00-name\x00guest=trellis-vm/5f3a9c/0000ff/r2/d,debug-threads=on\x00", []string{"0000ff"}},
		{"twice", "x\x005f3a9c\x00000001\x00y guest=trellis-vm/5f3a9c/000002/", []string{"000001", "000002"}},
		{"another state directory", "trellis-node-init\x00aaaaaa\x00ab12cd\x00r1\x00d\x00", nil},
		{"state id at the end", "sleep\x005f3a9c", nil},
		{"state id within a word", "x5f3a9cy000001", nil},
	}
	for _, tt := range tests {
		got := netsIn([]byte(tt.cmdline), st)
		want := map[string]bool{}
		for _, id := range tt.want {
			want[id] = true
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tt.name, got, want)
		}
	}
}

// A network with a process or a device in the snapshot is not empty: create looks for its
// leftovers.
func TestSnapshotEmpty(t *testing.T) {
	s := snapshotOf(time.Now(), []string{"tr0000aap1"})
	s.pids = map[string][]int{"0000bb": {42}}
	for id, want := range map[string]bool{"0000aa": false, "0000bb": false, "0000cc": true} {
		if s.empty(id) != want {
			t.Errorf("empty(%s) = %v, want %v", id, !want, want)
		}
	}
}

func TestGroupNet(t *testing.T) {
	const st = "5f3a9c"
	tests := []struct{ name, want string }{
		{"5f3a9c.ab12cd.r1", "ab12cd"},           // a container node's
		{"vm.5f3a9c.0000ff.r2", "0000ff"},        // a VM's
		{"5f3a9c.ab12cd.r1.with.dots", "ab12cd"}, // a node name with dots
		{"aaaaaa.ab12cd.r1", ""},                 // another state directory's
		{"x5f3a9c.ab12cd.r1", ""},                // the state id within a word
		{"5f3a9c.ab12c.r1", ""},                  // not a network id
		{"5f3a9c.ab12cd", ""},                    // no node
		{"machine.slice", ""},
	}
	for _, tt := range tests {
		if got := groupNet(tt.name, st); got != tt.want {
			t.Errorf("groupNet(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A snapshot with processes gives the node kinds a network's processes and control groups,
// none (not every one) for a network it has none of; a snapshot of devices only gives nothing.
func TestSnapshotListed(t *testing.T) {
	s := snapshotOf(time.Now(), nil)
	s.pids = map[string][]int{"0000aa": {7, 9}}
	s.groups = map[string][]string{"0000aa": {"5f3a9c.0000aa.r1"}}
	l := s.listed("0000aa")
	if l == nil || !slices.Equal(l.PIDs, []int{7, 9}) || !slices.Equal(l.Groups, []string{"5f3a9c.0000aa.r1"}) {
		t.Fatalf("listed(0000aa) = %+v", l)
	}
	l.PIDs[0] = 1 // the kinds' copy
	if s.pids["0000aa"][0] != 7 {
		t.Fatal("listed shares the snapshot's pids")
	}
	if l := s.listed("0000bb"); l == nil || l.PIDs == nil || len(l.PIDs) != 0 || len(l.Groups) != 0 {
		t.Fatalf("listed(0000bb) = %+v, want no processes (a non-nil empty list) and no groups", l)
	}
	if l := snapshotOf(time.Now(), nil).listed("0000aa"); l != nil {
		t.Fatalf("a devices-only snapshot listed %+v", l)
	}
	if l := (*Snapshot)(nil).listed("0000aa"); l != nil {
		t.Fatalf("no snapshot listed %+v", l)
	}
}
