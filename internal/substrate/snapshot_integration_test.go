//go:build integration

package substrate

import (
	"context"
	"maps"
	"slices"
	"syscall"
	"testing"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
)

const snapNet = `name: snap
nodes:
  a: {addresses: {eth1: [10.9.0.1/24]}}
  b: {addresses: {eth1: [10.9.0.2/24], eth2: [10.9.1.2/24]}}
  c: {addresses: {eth1: [10.9.1.3/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
  - endpoints: [b:eth2, c:eth1]
`

const snapNetNoC = `name: snap
nodes:
  a: {addresses: {eth1: [10.9.0.1/24]}}
  b: {addresses: {eth1: [10.9.0.2/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
`

// An apply handed a shared snapshot (as the cluster's agent does) finds the network's running
// nodes among the snapshot's processes and sweeps the control groups the snapshot lists: the
// nodes that run keep running (the same processes), and the group that a killed node left is
// removed when the node leaves the plan.
func TestApplyWithSnapshot(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.LeaveHostAsFound(t)
	h, err := cgroup.Detect()
	if err != nil {
		testkit.Skipf(t, "no control groups to sweep (%v): run on a host with cgroup v2 or the v1 controllers", err)
	}
	st, err := state.Open(testkit.TempStateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	up := func(ctx context.Context, text string) {
		t.Helper()
		n, err := spec.Parse("snap.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UpKeepLive(ctx, st, n, "", "snap.yaml", Options{}); err != nil {
			t.Fatal(err)
		}
	}
	up(ctx, snapNet)
	t.Cleanup(func() {
		if err := Down(st, "snap"); err != nil {
			t.Error(err)
		}
	})
	rec, err := st.Load("snap")
	if err != nil {
		t.Fatal(err)
	}
	before := rec.Nodes
	prefix := st.ID + "." + rec.NetID + "."
	if err := syscall.Kill(before["c"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := noderuntime.WaitGone(before["c"]); err != nil {
		t.Fatal(err)
	}
	snap, err := TakeSnapshot(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"a", "b"} {
		if !slices.Contains(snap.pids[rec.NetID], before[node]) {
			t.Fatalf("the snapshot's processes of the network %v lack node %s's init %d", snap.pids[rec.NetID], node, before[node])
		}
	}
	if !slices.Contains(snap.groups[rec.NetID], prefix+"c") {
		t.Fatalf("the snapshot's control groups of the network %v lack the killed node's %s", snap.groups[rec.NetID], prefix+"c")
	}
	// The kinds look only among the listing's processes: in an empty one they find no node.
	for _, tt := range []struct {
		listed *kinds.Listed
		want   []string
	}{{snap.listed(rec.NetID), []string{"a", "b"}}, {&kinds.Listed{PIDs: []int{}}, nil}} {
		found, err := runningNodes(&kinds.Env{Store: st, Plan: rec.Plan, Listed: tt.listed})
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(found)); !slices.Equal(got, tt.want) {
			t.Errorf("running among %v: %v, want %v", tt.listed.PIDs, got, tt.want)
		}
	}
	up(WithSnapshot(ctx, snap), snapNetNoC)
	rec, err = st.Load("snap")
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"a", "b"} {
		if rec.Nodes[node] != before[node] {
			t.Errorf("node %s: init %d, was %d: the apply did not find it running among the snapshot's processes", node, rec.Nodes[node], before[node])
		}
	}
	left, err := h.List(prefix)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	if want := []string{prefix + "a", prefix + "b"}; !slices.Equal(left, want) {
		t.Errorf("control groups of the network after the change: %v, want %v", left, want)
	}
}
