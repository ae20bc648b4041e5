package setup

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netns"
)

// Every bench run records itself in STATE_DIR/bench/ID.json before it creates anything, and
// everything it creates is named after its id or lives under its work directory:
//
//   - its work directory, TMPDIR/trellis-bench-ID, holds the state directories of its trellis
//     networks (state/ for those in the root namespace, state-K-HOST/ for those of simulated
//     machine HOST of pair K), its topology files and perf data;
//   - its simulated machines are the named network namespaces trbenchID-K-HOST;
//   - every process it starts names the work directory in its command line (the trellis binary
//     on the simulated machines, perf, the isolation part's load), except the trellis nodes,
//     which carry their state directory's id (noderuntime.Marker), and the user-space relay, which
//     runs inside a node and dies with it.
//
// The id is the bench's pid and a random nonce, and the record holds the process's start time,
// so a run whose process is gone (killed with SIGKILL) is told apart from a live one even if
// its pid was reused. Clean removes what such runs left behind, in the order that leaves
// nothing: processes, trellis networks, simulated machines, work directory, record.

// rootState is the work directory's state directory of the networks in the root namespace.
const rootState = "state"

// Run is the record of one bench run.
type Run struct {
	ID    string `json:"id"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // the process's start time, in clock ticks after boot
	Work  string `json:"work"`
	file  string
}

// runsDir is where the runs of state directory stateDir are recorded.
func runsDir(stateDir string) string { return filepath.Join(stateDir, "bench") }

// begin records a new run of this process and makes its work directory.
func begin(stateDir string) (*Run, error) {
	var nonce [3]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("%d-%s", pid, hex.EncodeToString(nonce[:]))
	r := &Run{ID: id, PID: pid, Start: start, Work: filepath.Join(os.TempDir(), "trellis-bench-"+id),
		file: filepath.Join(runsDir(stateDir), id+".json")}
	if err := os.MkdirAll(runsDir(stateDir), state.DirMode); err != nil {
		return nil, fmt.Errorf("bench runs: %w", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(r.file, data, state.FileMode); err != nil {
		return nil, fmt.Errorf("bench runs: %w", err)
	}
	if err := os.Mkdir(r.Work, 0o755); err != nil {
		os.Remove(r.file)
		return nil, fmt.Errorf("work directory: %w", err)
	}
	return r, nil
}

// end removes the run's work directory and record.
func (r *Run) end() error {
	if err := os.RemoveAll(r.Work); err != nil {
		return err
	}
	return os.Remove(r.file)
}

// netnsPrefix starts the names of the run's simulated machines.
func (r *Run) netnsPrefix() string { return "trbench" + r.ID + "-" }

// machineNetns is the named network namespace of simulated machine host of pair k.
func (r *Run) machineNetns(k int, host string) string {
	return fmt.Sprintf("%s%d-%s", r.netnsPrefix(), k, host)
}

// machineState is the trellis state directory of simulated machine host of pair k.
func (r *Run) machineState(k int, host string) string {
	return filepath.Join(r.Work, fmt.Sprintf("state-%d-%s", k, host))
}

// startTime is field 22 of /proc/PID/stat: when the process started, in clock ticks.
func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive says whether the run's process still runs.
func (r *Run) alive() bool {
	start, err := startTime(r.PID)
	return err == nil && start == r.Start
}

// Clean removes what bench runs of state directory stateDir left behind when they were killed
// (their process is gone): their processes, trellis networks, simulated machines, work
// directories and records. Live runs and everything else are left alone. It returns the ids
// of the runs it cleaned.
func Clean(stateDir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(runsDir(stateDir), "*.json"))
	if err != nil {
		return nil, err
	}
	var cleaned []string
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // ended meanwhile
		}
		var r Run
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err == nil && (r.ID == "" || r.Work == "" || !strings.HasPrefix(filepath.Base(r.Work), "trellis-bench-")) {
			err = errors.New("not a bench run record")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (remove it by hand if no bench runs)", f, err))
			continue
		}
		r.file = f
		if r.alive() {
			continue
		}
		if err := r.clean(); err != nil {
			errs = append(errs, fmt.Errorf("bench run %s: %w", r.ID, err))
			continue
		}
		cleaned = append(cleaned, r.ID)
	}
	return cleaned, errors.Join(errs...)
}

// clean removes what dead run r left behind.
func (r *Run) clean() error {
	if err := killMentioning(r.Work); err != nil {
		return err
	}
	if err := downRootNetworks(filepath.Join(r.Work, rootState)); err != nil {
		return err
	}
	machines, err := filepath.Glob(filepath.Join(r.Work, "state-*-*"))
	if err != nil {
		return err
	}
	for _, dir := range machines {
		if err := killNodes(dir); err != nil {
			return err
		}
	}
	if err := deleteNetns(r.netnsPrefix()); err != nil {
		return err
	}
	return r.end()
}

// records opens state directory dir, if it exists, and lists its networks.
func records(dir string) (*state.Store, []*state.Record, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	st, err := state.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	recs, err := st.List()
	return st, recs, err
}

// downRootNetworks takes down every network of state directory dir, as `trellis down` does.
func downRootNetworks(dir string) error {
	st, recs, err := records(dir)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := DownQuiet(st, rec.Name); err != nil {
			return err
		}
	}
	return nil
}

// killNodes ends the nodes of every network of a simulated machine's state directory and
// deletes their records (with what the records name outside it: the networks' copies of /etc).
// Their devices, tunnels and eBPF programs are in the machine's network namespace and go with
// it.
func killNodes(dir string) error {
	st, recs, err := records(dir)
	if err != nil {
		return err
	}
	var pids []int
	for _, rec := range recs {
		nodes, err := noderuntime.Find(st.ID, rec.NetID)
		if err != nil {
			return err
		}
		for _, pid := range nodes {
			if err := noderuntime.Kill(pid); err != nil {
				return fmt.Errorf("ending node process %d: %w", pid, err)
			}
			pids = append(pids, pid)
		}
	}
	if err := noderuntime.WaitGone(pids...); err != nil {
		return err
	}
	for _, rec := range recs {
		if err := st.Delete(rec.Name); err != nil {
			return err
		}
	}
	return nil
}

// killMentioning kills every process with an argument that holds a path under directory dir,
// with its process group if it leads one, and waits until they are gone.
func killMentioning(dir string) error {
	under := []byte(strings.TrimSuffix(dir, "/") + "/")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, under) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			syscall.Kill(-pid, syscall.SIGKILL) // the isolation part's load: its dd children too
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("ending process %d: %w", pid, err)
		}
		pids = append(pids, pid)
	}
	return noderuntime.WaitGone(pids...)
}

// netnsDir is where `ip netns add` binds named network namespaces.
const netnsDir = "/run/netns"

// deleteNetns deletes the named network namespaces whose name starts with prefix.
func deleteNetns(prefix string) error {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := netns.DeleteNamed(e.Name()); err != nil {
				return fmt.Errorf("network namespace %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}
