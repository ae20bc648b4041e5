package agent

import (
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// snapshotMaxAge bounds how long one listing of the machine's devices serves applies: it
// holds a network's devices until that network's next apply, but the kernel also deletes a
// node's ports when the node dies, and an apply that then misses them fails once and is
// applied again (worker.apply). A listing costs tens of milliseconds; a pass over a hundred
// networks takes seconds, and shares one listing per snapshotMaxAge.
const snapshotMaxAge = 5 * time.Second

// snapshots hands the applies of the machine's networks one listing of the machine's devices
// (substrate.Snapshot), taken again when the last one is older than what an apply needs.
type snapshots struct {
	take func() (*substrate.Snapshot, error) // substrate.TakeSnapshot of the state directory
	now  func() time.Time

	mu   sync.Mutex
	last *substrate.Snapshot
}

func newSnapshots(st *state.Store) *snapshots {
	return &snapshots{take: func() (*substrate.Snapshot, error) { return substrate.TakeSnapshot(st.ID) }, now: time.Now}
}

// after returns a snapshot taken after since (when the network's last apply or removal
// ended: its devices have not changed since, but by the kernel) and within snapshotMaxAge,
// listing anew if the last one is not. Callers that need one at the same time share it.
func (s *snapshots) after(since time.Time) (*substrate.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.last; l != nil && l.Taken.After(since) && s.now().Sub(l.Taken) < snapshotMaxAge {
		return l, nil
	}
	snap, err := s.take()
	if err != nil {
		return nil, err
	}
	s.last = snap
	return snap, nil
}
