package substrate

import (
	"context"
	"time"

	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
)

// An apply that trusts nothing but the kernel (a network new to the machine, or one whose last
// change was interrupted) lists the substrate's devices to find its network's. A listing takes
// as long as the machine has devices, and a cluster's agent applying a hundred networks made a
// hundred of them while the others' applies interrupted each (netdev.Dump runs it again). A
// Snapshot is one listing shared by the applies of many networks: a device's name says its
// network (plan.DeviceNetID), and only that network's apply makes or deletes it, so a snapshot
// taken after a network's last apply ended still holds that network's devices, whatever the
// others did meanwhile. The caller (the agent) hands each apply a snapshot taken after that
// network's last apply or removal ended; the kernel may still delete a port by itself (its
// node died), which the apply finds missing and fails on, and then the caller applies again
// without a snapshot.

// Snapshot is the machine's substrate devices, by network id, as listed at one moment.
type Snapshot struct {
	Taken time.Time
	byNet map[string][]string
}

// TakeSnapshot lists the machine's substrate devices.
func TakeSnapshot() (*Snapshot, error) {
	taken := time.Now() // before the listing: a device made during it counts as after
	all, err := netdev.List()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, d := range all {
		names[i] = d.Attrs().Name
	}
	return snapshotOf(taken, names), nil
}

func snapshotOf(taken time.Time, names []string) *Snapshot {
	s := &Snapshot{Taken: taken, byNet: map[string][]string{}}
	for _, name := range names {
		if id := plan.DeviceNetID(name); id != "" {
			s.byNet[id] = append(s.byNet[id], name)
		}
	}
	return s
}

// devices returns the devices of network netID in the snapshot.
func (s *Snapshot) devices(netID string) []string { return s.byNet[netID] }

type snapshotKey struct{}

// WithSnapshot returns a context whose applies (Up, UpKeepLive) find the network's devices in
// s instead of listing the machine's. The caller guarantees that s was taken after the
// network's last apply or removal on this machine ended.
func WithSnapshot(ctx context.Context, s *Snapshot) context.Context {
	return context.WithValue(ctx, snapshotKey{}, s)
}

// SnapshotFrom returns the snapshot of ctx (WithSnapshot), or nil.
func SnapshotFrom(ctx context.Context) *Snapshot {
	s, _ := ctx.Value(snapshotKey{}).(*Snapshot)
	return s
}
