package substrate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
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
// It also holds the processes and control groups of each network: a network new to the machine
// (created) first looks for nodes of an earlier life of its network id, scanning every
// process once per node kind, and for its devices; with neither in the snapshot, it has none.
// A network that changes finds its running nodes among its processes in the snapshot, sweeps
// its control groups there, and a creation allocates its uid range from the node inits there
// (kinds.Env.Listed), instead of each scanning every process and control group of the machine.
// Processes and control groups too are made only by the network's own apply. A uid range is
// allocated under the machine's registry (state.AllocUIDs), which holds every range that a
// node started after the snapshot has; the scan only adds ranges whose registry entry was lost.

// Snapshot is the machine's substrate devices, by network id, as listed at one moment, and the
// processes and control groups of one state directory's networks then.
type Snapshot struct {
	Taken  time.Time
	byNet  map[string][]string
	pids   map[string][]int    // by network id named in the process's command line (procNets)
	groups map[string][]string // control groups under cgroup.Parent, by network id (groupNets)
	// uidBases are the first host uids of the node inits' user namespaces, read once if asked
	uidBases func() (map[uint32]bool, error)
}

// TakeSnapshot lists the machine's substrate devices, control groups and processes, for state
// directory stateID's networks.
func TakeSnapshot(stateID string) (*Snapshot, error) {
	s, err := listSnapshot()
	if err != nil {
		return nil, err
	}
	if s.groups, err = groupNets(stateID); err != nil {
		return nil, err
	}
	pids, inits, err := procNets(stateID)
	if err != nil {
		return nil, err
	}
	s.pids = pids
	s.uidBases = sync.OnceValues(func() (map[uint32]bool, error) { return noderuntime.UIDBasesIn(inits) })
	return s, nil
}

// procNets returns the pids of the processes whose command line names a network of state id
// stateID, by network id (netsIn), and those of the node inits of every state directory. It
// finds more than the kinds would (any command line naming them), never fewer.
func procNets(stateID string) (map[string][]int, []int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, err
	}
	out, inits := map[string][]int{}, []int{}
	initMark := []byte(noderuntime.InitArg0 + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for id := range netsIn(cmdline, stateID) {
			out[id] = append(out[id], pid)
		}
		if bytes.HasPrefix(cmdline, initMark) {
			inits = append(inits, pid)
		}
	}
	return out, inits, nil
}

// netsIn returns the network ids that follow stateID and one separator ("\x00" or "/") in
// cmdline: the node kinds mark every process they start with both (a node init's ARG0
// STATE-ID NET-ID NAME DIGEST, a VM's guest=trellis-STATE-ID/NET-ID/...).
func netsIn(cmdline []byte, stateID string) map[string]bool {
	const idLen = 6 // plan's network ids
	out := map[string]bool{}
	for rest := cmdline; ; {
		i := bytes.Index(rest, []byte(stateID))
		if i < 0 {
			return out
		}
		rest = rest[i+len(stateID):]
		if len(rest) > idLen && (rest[0] == 0 || rest[0] == '/') {
			out[string(rest[1:1+idLen])] = true
		}
	}
}

// hierarchy is the machine's control group hierarchy.
var hierarchy = sync.OnceValues(cgroup.Detect)

// groupNets lists the control groups under cgroup.Parent by the network id that follows
// stateID and a "." in their name: the node kinds name their groups [KIND.]STATE-ID.NET-ID.NODE.
func groupNets(stateID string) (map[string][]string, error) {
	out := map[string][]string{}
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return out, nil // the kinds have none to sweep
	}
	if err != nil {
		return nil, err
	}
	names, err := h.List("")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if id := groupNet(name, stateID); id != "" {
			out[id] = append(out[id], name)
		}
	}
	return out, nil
}

// groupNet returns the network id in control group name of state id stateID, or "".
func groupNet(name, stateID string) string {
	const idLen = 6
	i := strings.Index(name, stateID+".")
	if i < 0 || (i > 0 && name[i-1] != '.') {
		return ""
	}
	rest := name[i+len(stateID)+1:]
	if len(rest) <= idLen || rest[idLen] != '.' {
		return ""
	}
	return rest[:idLen]
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
func (s *Snapshot) empty(netID string) bool {
	return len(s.byNet[netID]) == 0 && len(s.pids[netID]) == 0
}

// listed returns what the snapshot holds of network netID for the node kinds, or nil if the
// snapshot lists only devices.
func (s *Snapshot) listed(netID string) *kinds.Listed {
	if s == nil || s.pids == nil {
		return nil
	}
	return &kinds.Listed{PIDs: append([]int{}, s.pids[netID]...), Groups: s.groups[netID], UIDBases: s.uidBases}
}

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
