package substrate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

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
//
// It also holds which networks have processes on the machine: a network new to the machine
// (created) first looks for nodes of an earlier life of its network id, scanning every
// process once per node kind, and for its devices; with neither in the snapshot, it has none.
// Processes too are started only by the network's own apply.

// Snapshot is the machine's substrate devices, by network id, as listed at one moment, and the
// networks of one state directory that have processes then.
type Snapshot struct {
	Taken time.Time
	byNet map[string][]string
	procs map[string]bool // network ids named in a process's command line (procNets)
}

// TakeSnapshot lists the machine's substrate devices and the processes of state directory
// stateID's networks.
func TakeSnapshot(stateID string) (*Snapshot, error) {
	s, err := listSnapshot()
	if err != nil {
		return nil, err
	}
	if s.procs, err = procNets(stateID); err != nil {
		return nil, err
	}
	return s, nil
}

// procNets returns the network ids that follow state id stateID and one separator ("\x00" or
// "/") in any process's command line: the node kinds mark every process they start with both
// (a node init's ARG0 STATE-ID NET-ID NAME DIGEST, a VM's guest=trellis-STATE-ID/NET-ID/...).
// It finds more than the kinds would (any command line naming them), never fewer.
func procNets(stateID string) (map[string]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil {
			netsIn(cmdline, stateID, out)
		}
	}
	return out, nil
}

// netsIn adds to out the network ids that follow stateID and a separator in cmdline.
func netsIn(cmdline []byte, stateID string, out map[string]bool) {
	const idLen = 6 // plan's network ids
	for rest := cmdline; ; {
		i := bytes.Index(rest, []byte(stateID))
		if i < 0 {
			return
		}
		rest = rest[i+len(stateID):]
		if len(rest) > idLen && (rest[0] == 0 || rest[0] == '/') {
			out[string(rest[1:1+idLen])] = true
		}
	}
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

// empty tells whether network netID had neither devices nor processes in the snapshot.
func (s *Snapshot) empty(netID string) bool { return len(s.byNet[netID]) == 0 && !s.procs[netID] }

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

// listSnapshot lists the machine's devices only (what an apply without a snapshot needs).
func listSnapshot() (*Snapshot, error) { return deviceSnapshot(hostMachine{}) }
