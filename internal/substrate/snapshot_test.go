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
	if SnapshotFrom(context.Background()) != nil {
		t.Fatal("a context without a snapshot gave one")
	}
}
