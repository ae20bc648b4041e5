package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
)

// TestPutPlacements writes placements in batches through a fenced store: N placements take
// ceil(N/63) transactions (etcd's 128 operations: two compares each and the fence's); large
// ones are split under etcd's request size; a batch with one network changed meanwhile writes
// the others and refuses that one with ErrConflict; with the fence gone nothing is written.
func TestPutPlacements(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = ElectionPrefix + "batch-test/leader"
	put, err := s.cli.Put(ctx, key, "leader")
	if err != nil {
		t.Fatal(err)
	}
	f := s.Fenced(Fence{Key: key, Rev: put.Header.Revision})
	const n = 150
	ws := make([]PlacementWrite, n)
	for i := range ws {
		name := fmt.Sprintf("n%d", i)
		gen, err := s.Up(ctx, &Network{Tenant: "batch", Name: name, Source: "x"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ws[i].Placement = &Placement{Tenant: "batch", Network: name, Generation: gen, Nodes: map[string]string{"a": "m1"}}
	}
	// writes puts ws through store st, checks each error against want (by index; nil: none)
	// and returns the transactions etcd applied (its revision's growth).
	writes := func(st *Store, want func(i int) error) int64 {
		t.Helper()
		before := revisionOf(ctx, t, s)
		for i, err := range st.PutPlacements(ctx, ws) {
			if w := want(i); (w == nil) != (err == nil) || (w != nil && !errors.Is(err, w)) {
				t.Errorf("placement %d: %v, want %v", i, err, w)
			}
		}
		return revisionOf(ctx, t, s) - before
	}
	none := func(int) error { return nil }

	if got, want := writes(f, none), int64((n+62)/63); got != want {
		t.Errorf("%d placements written in %d transactions, want %d", n, got, want)
	}
	for i := range ws {
		p, err := s.Placement(ctx, "batch", ws[i].Placement.Network)
		if err != nil || p.Revision != ws[i].Placement.Revision || p.Nodes["a"] != "m1" {
			t.Fatalf("placement %d as read: %+v, %v; written at revision %d", i, p, err, ws[i].Placement.Revision)
		}
		ws[i].Expect = p.Revision
	}

	t.Run("one network changed meanwhile", func(t *testing.T) {
		gen, err := s.Up(ctx, &Network{Tenant: "batch", Name: "n70", Source: "y"}, ws[70].Placement.Generation)
		if err != nil {
			t.Fatal(err)
		}
		got := writes(f, func(i int) error {
			if i == 70 {
				return ErrConflict
			}
			return nil
		})
		// the first and third batches whole, the second's (n63..n125) one at a time but n70
		if want := int64(2 + 62); got != want {
			t.Errorf("%d transactions, want %d", got, want)
		}
		for i := range ws {
			if i != 70 { // n70's placement did not change
				ws[i].Expect = ws[i].Placement.Revision
			}
		}
		ws[70].Placement.Generation = gen
	})

	t.Run("large placements", func(t *testing.T) {
		big := strings.Repeat("x", 300<<10)
		for i := range ws[:10] {
			ws[i].Placement.Refused = big
		}
		defer func() {
			for i := range ws[:10] {
				ws[i].Placement.Refused = ""
			}
		}()
		got := writes(s, none)
		// 3 MB in batches of at most 1 MiB: 3 of 3 large ones, then the rest
		if got < 5 {
			t.Errorf("%d transactions, want at least 5 (1 MiB each at most)", got)
		}
		for i := range ws {
			ws[i].Expect = ws[i].Placement.Revision
		}
	})

	t.Run("fence gone", func(t *testing.T) {
		if _, err := s.cli.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if got := writes(f, func(int) error { return ErrNotLeader }); got != 0 {
			t.Errorf("%d transactions applied after the fence went, want 0", got)
		}
	})
}

// revisionOf is etcd's current revision.
func revisionOf(ctx context.Context, t *testing.T, s *Store) int64 {
	t.Helper()
	resp, err := s.cli.Get(ctx, "/revision")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
