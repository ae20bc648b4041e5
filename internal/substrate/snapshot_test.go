package substrate

import (
	"context"
	"maps"
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
		got := map[string]bool{}
		netsIn([]byte(tt.cmdline), st, got)
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
	s.procs = map[string]bool{"0000bb": true}
	for id, want := range map[string]bool{"0000aa": false, "0000bb": false, "0000cc": true} {
		if s.empty(id) != want {
			t.Errorf("empty(%s) = %v, want %v", id, !want, want)
		}
	}
}
