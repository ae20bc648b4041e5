package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// fakeSnapshots counts the listings, at a clock the test moves.
func fakeSnapshots(now *time.Time, takes *int) *snapshots {
	s := newSnapshots(nil)
	s.now = func() time.Time { return *now }
	s.take = func() (*substrate.Snapshot, error) {
		*takes++
		return &substrate.Snapshot{Taken: *now}, nil
	}
	return s
}

func TestSnapshotsShareOneListing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now, takes := t0, 0
	s := fakeSnapshots(&now, &takes)
	steps := []struct {
		what  string
		at    time.Time // now
		since time.Time // the network's last apply ended
		takes int       // listings so far
	}{
		{"first apply of a network", t0, time.Time{}, 1},
		{"another network new to the machine", t0.Add(time.Second), time.Time{}, 1},
		{"a network applied before the listing", t0.Add(2 * time.Second), t0.Add(-time.Second), 1},
		{"a network applied since the listing", t0.Add(2 * time.Second), t0.Add(time.Second), 2},
		{"the listing is too old", t0.Add(2*time.Second + snapshotMaxAge), time.Time{}, 3},
	}
	for _, st := range steps {
		now = st.at
		snap, err := s.after(st.since)
		if err != nil {
			t.Fatal(err)
		}
		if takes != st.takes || !snap.Taken.After(st.since) {
			t.Fatalf("%s: %d listings (want %d), snapshot of %v for a network applied at %v", st.what, takes, st.takes, snap.Taken, st.since)
		}
	}
}

// worker.apply uses the shared listing, and applies again with a listing of its own when that
// failed for a reason other than later's.
func TestWorkerApplyRetriesWithoutSnapshot(t *testing.T) {
	errDevice := errors.New("port tr0000aap1: no such device")
	tests := []struct {
		name      string
		errs      []error // what each up returns
		wantCalls int
		wantSnaps []bool // whether each up had a snapshot
		wantErr   error
	}{
		{"converges", []error{nil}, 1, []bool{true}, nil},
		{"stale listing", []error{errDevice, nil}, 2, []bool{true, false}, nil},
		{"fails both times", []error{errDevice, errDevice}, 2, []bool{true, false}, errDevice},
		{"busy is tried later", []error{state.ErrBusy}, 1, []bool{true}, state.ErrBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now, takes := time.Unix(1000, 0), 0
			a := &Agent{log: slog.New(slog.NewTextHandler(io.Discard, nil)), snaps: fakeSnapshots(&now, &takes)}
			w := &worker{a: a, name: "t-n"}
			var snaps []bool
			_, err := w.apply(context.Background(), func(ctx context.Context) (*substrate.Result, error) {
				snaps = append(snaps, substrate.SnapshotFrom(ctx) != nil)
				return &substrate.Result{}, tt.errs[len(snaps)-1]
			})
			if !errors.Is(err, tt.wantErr) || len(snaps) != tt.wantCalls {
				t.Fatalf("err %v after %d ups, want %v after %d", err, len(snaps), tt.wantErr, tt.wantCalls)
			}
			for i := range snaps {
				if snaps[i] != tt.wantSnaps[i] {
					t.Fatalf("ups with a snapshot: %v, want %v", snaps, tt.wantSnaps)
				}
			}
			if w.ended.IsZero() {
				t.Fatal("the apply's end was not recorded")
			}
		})
	}
}
