package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
)

// TestFenced writes placements through a store fenced with a key: they hold while the key is
// there at its revision; once it is deleted, or deleted and made again, every write is refused
// with ErrNotLeader and changes nothing; a conflict of a fenced write that still leads stays
// ErrConflict.
func TestFenced(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const key = ElectionPrefix + "fence-test/leader"
	for _, tc := range []struct {
		name string
		lose func() error // takes the fence away; nil: it holds
		want error
	}{
		{"holds", nil, nil},
		{"key deleted", func() error { _, err := s.cli.Delete(ctx, key); return err }, ErrNotLeader},
		{"key made again", func() error {
			if _, err := s.cli.Delete(ctx, key); err != nil {
				return err
			}
			_, err := s.cli.Put(ctx, key, "another")
			return err
		}, ErrNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put, err := s.cli.Put(ctx, key, "leader")
			if err != nil {
				t.Fatal(err)
			}
			f := s.Fenced(Fence{Key: key, Rev: put.Header.Revision})
			rev, err := s.Up(ctx, &Network{Tenant: "fence", Name: "lab", Source: "x"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			p := &Placement{Tenant: "fence", Network: "lab", Generation: rev, Nodes: map[string]string{"a": "m1"}}
			if _, err := f.PutPlacement(ctx, p, 0); err != nil {
				t.Fatalf("fenced write while the fence holds: %v", err)
			}
			if tc.lose != nil {
				if err := tc.lose(); err != nil {
					t.Fatal(err)
				}
			}
			before := p.Revision
			if _, err := f.PutPlacement(ctx, p, p.Revision); !errors.Is(err, tc.want) {
				t.Errorf("placement written again: %v, want %v", err, tc.want)
			}
			stale := tc.want // a lost fence is told before a conflict
			if stale == nil {
				stale = ErrConflict
			}
			if _, err := f.PutPlacement(ctx, p, 1); !errors.Is(err, stale) {
				t.Errorf("placement written at a stale revision: %v, want %v", err, stale)
			}
			if err := s.Down(ctx, "fence", "lab", 0); err != nil {
				t.Fatal(err)
			}
			_, seen, _ := s.Networks(ctx, "fence")
			got, _ := s.Placement(ctx, "fence", "lab")
			if tc.want != nil && got.Revision != before {
				t.Errorf("the placement changed (revision %d, was %d) after the fence went", got.Revision, before)
			}
			if err := f.DropPlacement(ctx, got, seen); !errors.Is(err, tc.want) {
				t.Errorf("placement dropped: %v, want %v", err, tc.want)
			}
			if err := s.DropPlacement(ctx, got, seen); tc.want != nil && err != nil {
				t.Fatalf("unfenced drop, to clean up: %v", err)
			}
			s.cli.Delete(ctx, key)
		})
	}
}
