package vm

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
)

// findQEMU finds the QEMU processes of network netID of state stateID by their guest names:
// by node, normally one (two only if something went wrong; Stop ends them all). Only processes
// whose name (/proc/PID/comm: the executed file's name, at most 15 bytes) is QEMU's have their
// command line read: reading a command line takes the process's memory map, and with thousands
// of node processes on the machine that made this search most of a container network's down.
func findQEMU(stateID, netID string) (map[string][]kinds.Instance, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, e.Name())
		}
	}
	return findQEMUIn(pids, stateID, netID)
}

// findQEMUs is findQEMU among the processes of env.Listed if it has a listing.
func findQEMUs(env *kinds.Env) (map[string][]kinds.Instance, error) {
	if env.Listed == nil {
		return findQEMU(env.Store.ID, env.Plan.NetID)
	}
	pids := make([]string, len(env.Listed.PIDs))
	for i, pid := range env.Listed.PIDs {
		pids[i] = strconv.Itoa(pid)
	}
	return findQEMUIn(pids, env.Store.ID, env.Plan.NetID)
}

// findQEMUIn is findQEMU among processes pids.
func findQEMUIn(pids []string, stateID, netID string) (map[string][]kinds.Instance, error) {
	prefix := "guest=" + markerPrefix + stateID + "/" + netID + "/"
	out := map[string][]kinds.Instance{}
	for _, id := range pids {
		d := filepath.Join("/proc", id, "cmdline")
		if comm, err := os.ReadFile(filepath.Join("/proc", id, "comm")); err != nil || !isQEMUComm(comm) {
			continue
		}
		data, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(data, []byte(prefix)) {
			continue
		}
		argv := strings.Split(string(data), "\x00")
		if filepath.Base(argv[0]) != QEMU {
			continue
		}
		for _, arg := range argv {
			rest, ok := strings.CutPrefix(arg, prefix)
			if !ok {
				continue
			}
			rest, _, _ = strings.Cut(rest, ",")
			name, digest, ok := strings.Cut(rest, "/")
			pid, err := strconv.Atoi(id)
			if ok && err == nil && !noderuntime.Gone(pid) {
				out[name] = append(out[name], kinds.Instance{Kind: Name, Name: name, PID: pid, Digest: digest})
			}
		}
	}
	return out, nil
}

// isQEMUComm tells whether a process name (/proc/PID/comm, newline-terminated) is QEMU's,
// which the kernel cuts to 15 bytes.
func isQEMUComm(comm []byte) bool {
	name := QEMU[:min(len(QEMU), 15)]
	return string(bytes.TrimSuffix(comm, []byte("\n"))) == name
}
