package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/state"
)

// memUse is what /proc/meminfo says of the machine's memory, in bytes.
type memUse struct {
	Used uint64 // MemTotal - MemAvailable
	Slab uint64
}

// machineUsed reads the machine's memory in use (MemTotal - MemAvailable) and its slab.
func machineUsed() (memUse, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return memUse{}, err
	}
	defer f.Close()
	vals := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 {
			v, _ := strconv.ParseUint(fields[1], 10, 64)
			vals[strings.TrimSuffix(fields[0], ":")] = v * 1024
		}
	}
	if vals["MemTotal"] == 0 || vals["MemAvailable"] == 0 {
		return memUse{}, fmt.Errorf("/proc/meminfo: no MemTotal or MemAvailable")
	}
	return memUse{Used: vals["MemTotal"] - vals["MemAvailable"], Slab: vals["Slab"]}, nil
}

// pss is a process's proportional set size in bytes (its share of the pages it maps).
func pss(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no Pss in smaps_rollup of %d", pid)
}

// idleMemory is what an idle node of network name costs: the machine's memory in use now
// against before (taken before the network was made), per node, and the share of it that is
// the nodes' init processes (their PSS); the rest is the kernel's (namespaces, devices,
// cgroups, page tables, the private directories' tmpfs).
func idleMemory(st *state.Store, name string, before memUse) (*result.NodeMemory, error) {
	after, err := machineUsed()
	if err != nil {
		return nil, err
	}
	rec, err := st.Load(name)
	if err != nil || rec == nil {
		return nil, fmt.Errorf("network %s: no record (%v)", name, err)
	}
	pids, err := noderuntime.Find(st.ID, rec.NetID)
	if err != nil || len(pids) == 0 {
		return nil, fmt.Errorf("network %s: no nodes found (%v)", name, err)
	}
	var inits uint64
	threads := 0
	for _, pid := range pids {
		p, err := pss(pid)
		if err != nil {
			return nil, err
		}
		inits += p
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return nil, err
		}
		threads += len(tasks)
	}
	n := uint64(len(pids))
	m := &result.NodeMemory{Init: inits / n, Threads: float64(threads) / float64(n)}
	if after.Used > before.Used {
		m.Machine = (after.Used - before.Used) / n
	}
	if after.Slab > before.Slab {
		m.Slab = (after.Slab - before.Slab) / n
	}
	if m.Machine > m.Init {
		m.Kernel = m.Machine - m.Init
	}
	return m, nil
}
