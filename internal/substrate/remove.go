package substrate

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/node"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// Down removes network name from the machine: its nodes (with every process in them), its
// ports, bridges, shapers and eBPF programs, and its record.
func Down(st *state.Store, name string) error {
	unlock, err := st.Lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := st.Load(name)
	if err != nil {
		return err
	}
	if rec == nil {
		st.Delete(name) // the lock file just made
		return fmt.Errorf("no network named %s in %s", name, st.Dir)
	}
	return remove(st, rec)
}

// remove finds everything of a network by its names, not by the record alone, so that it also
// finds what an interrupted `up` made after its last save. It touches only node processes marked
// with this state directory and network, and devices named after this network.
func remove(st *state.Store, rec *state.Record) error {
	nodes, err := node.Find(st.ID, rec.NetID)
	if err != nil {
		return err
	}
	for _, pid := range nodes {
		if err := node.Kill(pid); err != nil {
			return fmt.Errorf("ending node process %d: %w", pid, err)
		}
	}
	for _, pid := range nodes {
		waitGone(pid)
	}
	if err := removeDecap(st, rec.Plan); err != nil {
		return err
	}
	// Ports vanish with their nodes' network namespaces, which the kernel frees in batches;
	// what remains (bridges, tunnel devices) is deleted here.
	if err := deleteDevices(rec.NetID); err != nil {
		return err
	}
	return st.Delete(rec.Name)
}

// waitGone waits until a killed process has left the process table.
func waitGone(pid int) {
	for i := 0; i < 1000; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(data), ") Z ") {
			return // a zombie: its namespaces are already released
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deleteDevices deletes the substrate devices of network netID, waiting a while first for the
// ports, which the kernel is about to delete itself.
func deleteDevices(netID string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		devs, err := devicesOf(netID)
		if err != nil || len(devs) == 0 {
			return err
		}
		late := time.Now().After(deadline)
		for _, d := range devs {
			if plan.DeviceKind(d.Attrs().Name) != 'p' || late {
				if err := netlink.LinkDel(d); err != nil && !isGone(err) {
					return fmt.Errorf("deleting %s: %w", d.Attrs().Name, err)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func devicesOf(netID string) ([]netlink.Link, error) {
	links, err := netlink.LinkList()
	// The kernel interrupts a listing when devices change during it, as they do while
	// namespaces are freed or other networks come and go: list again.
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 50; try++ {
		links, err = netlink.LinkList()
	}
	if err != nil {
		return nil, err
	}
	var out []netlink.Link
	for _, l := range links {
		if plan.DeviceNetID(l.Attrs().Name) == netID {
			out = append(out, l)
		}
	}
	return out, nil
}

func isGone(err error) bool {
	var notFound netlink.LinkNotFoundError
	return errors.As(err, &notFound) || errors.Is(err, syscall.ENODEV)
}

// checkRunning tells whether every node of a network that is up still runs.
func checkRunning(st *state.Store, rec *state.Record) error {
	running, err := node.Find(st.ID, rec.NetID)
	if err != nil {
		return err
	}
	for name := range rec.Nodes {
		if _, ok := running[name]; !ok {
			return fmt.Errorf("node %s of network %s is no longer running; run `trellis down %s`, then `trellis up` again", name, rec.Name, rec.Name)
		}
	}
	return nil
}
