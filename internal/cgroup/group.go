package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultPids is a node's process limit when the file gives none: enough for any routing suite,
// and a fork bomb stops there.
const DefaultPids = 1024

// period is the CFS period, in microseconds, over which a node's CPU quota is counted.
const period = 100000

// Limits are a node's resource limits. Zero values mean no limit (Pids: DefaultPids).
type Limits struct {
	CPUs   float64 // cores: a CFS quota of CPUs*period per period
	Cpuset string  // the cores the node may run on, as cpuset.cpus takes them ("0-1,3")
	Memory uint64  // bytes, page cache and tmpfs files included; over it, the kernel kills inside the group
	Pids   int64   // processes and threads
	// Period is the CFS period over which the CPU quota is counted (0: 100 ms); a short one
	// keeps the quota's share within each short interval (a VM's reservation, docs/vm.md).
	Period time.Duration
}

// Check refuses limits the host cannot honour: more cores than it has, cores it lacks.
func Check(l Limits) error {
	online, err := onlineCPUs()
	if err != nil {
		return err
	}
	if l.CPUs > float64(len(online)) {
		return fmt.Errorf("%w: cpus %g, but this machine has %d cores", ErrLimit, l.CPUs, len(online))
	}
	if l.Cpuset != "" {
		want, err := ParseCPUList(l.Cpuset)
		if err != nil {
			return fmt.Errorf("%w: cpuset %q: %v", ErrLimit, l.Cpuset, err)
		}
		for _, c := range want {
			if !online[c] {
				return fmt.Errorf("%w: cpuset %q names core %d, which this machine lacks (it has %s)", ErrLimit, l.Cpuset, c, onlineText())
			}
		}
	}
	return nil
}

func onlineText() string {
	data, _ := os.ReadFile("/sys/devices/system/cpu/online")
	return strings.TrimSpace(string(data))
}

var onlineCPUs = sync.OnceValues(func() (map[int]bool, error) {
	list, err := ParseCPUList(onlineText())
	if err != nil {
		return nil, fmt.Errorf("online cores: %w", err)
	}
	out := map[int]bool{}
	for _, c := range list {
		out[c] = true
	}
	return out, nil
})

// ParseCPUList reads a list of cores as the kernel writes them: "0-3,6,8-9".
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b > 4095 {
			return nil, fmt.Errorf("%q is not a list of cores such as 0-1,3", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// Group is one node's control group.
type Group struct {
	h    *Hierarchy
	name string
	dirs map[string]string
}

// Open returns group name (under Parent), made or not.
func (h *Hierarchy) Open(name string) *Group { return &Group{h: h, name: name, dirs: h.dirs(name)} }

// Create makes group name with limits l, or sets its limits if it exists.
func (h *Hierarchy) Create(name string, l Limits) (*Group, error) {
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	g := h.Open(name)
	if g.h.V2 == "" && l.Cpuset == "" {
		g.dropCpuset()
	}
	fresh := true
	for c, dir := range g.dirs {
		made, err := makeDir(dir, c)
		if err != nil {
			return nil, err
		}
		fresh = fresh && made
	}
	if err := g.set(l, fresh); err != nil {
		return nil, err
	}
	return g, nil
}

// dropCpuset leaves the v1 cpuset hierarchy out of a group without a cpuset limit: its node
// runs on the cores of trellis's own cpuset, as it would in a child of Parent that copies the
// machine's. A v1 cpuset child that copies its parent's cores (cgroup.clone_children) costs a
// walk over all its siblings when it is made (cpuset_css_online): every node of the machine
// is one, so making n groups took time in n squared (0.2 ms more per mkdir for every 1000
// groups there), under the kernel's machine-wide cgroup lock; and writing the cores instead
// takes about 50 ms a group. A group left from an earlier start with a cpuset limit loses
// its cpuset directory (it is empty: the node is stopped before its group is made again).
func (g *Group) dropCpuset() {
	dir := g.dirs["cpuset"]
	delete(g.dirs, "cpuset")
	if _, err := os.Stat(dir); err == nil {
		rmdir(dir)
	}
}

// parents holds the parent directories (Parent, one per hierarchy) that ensureParent has set
// up in this process, so that each node's group costs its own directory only.
var parents sync.Map

// makeDir makes a group's directory and its parent (Parent), which another trellis may be
// removing at the same moment as its last group goes: then it tries again. made tells whether
// the directory is new (not there before).
func makeDir(dir, controller string) (made bool, err error) {
	parent := filepath.Dir(dir)
	for range 5 {
		if _, ok := parents.Load(parent); ok {
			err = nil
		} else if err = ensureParent(parent, controller); err == nil {
			parents.Store(parent, true)
		}
		if err == nil {
			dirMu.Lock()
			err = os.Mkdir(dir, 0o755)
			dirMu.Unlock()
			if err == nil || errors.Is(err, os.ErrExist) {
				return err == nil, nil
			}
		}
		if !errors.Is(err, os.ErrNotExist) {
			break
		}
		parents.Delete(parent) // removed meanwhile: make it again
	}
	return false, fmt.Errorf("cgroup %s: %w", dir, err)
}

// ensureParent makes Parent in one hierarchy, with what its children need from it: a v1
// cpuset needs its cores and memory nodes, and passes them on to each new child
// (cgroup.clone_children), v2 its controllers enabled for the children.
func ensureParent(dir, controller string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	switch controller {
	case "cpuset":
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, _ := read(dir, f); v == "" {
				root, err := read(filepath.Dir(dir), f)
				if err == nil {
					err = write(dir, f, root)
				}
				if err != nil {
					return err
				}
			}
		}
		return write(dir, "cgroup.clone_children", "1")
	case "":
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := write(d, "cgroup.subtree_control", "+cpu +cpuset +memory +pids"); err != nil {
				return err
			}
		}
	}
	return nil
}

// set writes the limits into the group's files. In a fresh group (just made) it leaves out
// the files whose kernel default is the value wanted: most nodes have no CPU or memory limit,
// and a v1 cpuset child has its parent's cores and memory nodes already (clone_children).
func (g *Group) set(l Limits, fresh bool) error {
	for _, f := range g.files(l) {
		if _, ok := g.dirs[f.controller]; !ok {
			continue // dropCpuset
		}
		if fresh && f.value == f.fresh {
			continue
		}
		if f.value == inheritCpuset {
			if fresh && g.inherited() {
				continue
			}
			v, err := read(filepath.Dir(g.dirs[f.controller]), f.name)
			if err != nil {
				return err
			}
			f.value = v
		}
		if err := write(g.dirs[f.controller], f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

// inheritCpuset stands for the value of the parent's own file (v1 cpuset.cpus, cpuset.mems).
const inheritCpuset = "\x00parent"

// limitFile is one file of a group's limits: its value, and a fresh group's (kernel default).
type limitFile struct{ controller, name, value, fresh string }

// files lists the files that hold limits l, with their values.
func (g *Group) files(l Limits) []limitFile {
	per := period
	if l.Period > 0 {
		per = int(l.Period / time.Microsecond)
	}
	quota := "-1"
	if l.CPUs > 0 {
		quota = strconv.Itoa(int(l.CPUs * float64(per)))
	}
	mem := "-1"
	if l.Memory > 0 {
		mem = strconv.FormatUint(l.Memory, 10)
	}
	pids := strconv.FormatInt(l.Pids, 10)
	if g.h.V2 != "" {
		if quota == "-1" {
			quota = "max"
		}
		if mem == "-1" {
			mem = "max"
		}
		return []limitFile{{"", "cpu.max", fmt.Sprintf("%s %d", quota, per), fmt.Sprintf("max %d", period)},
			{"", "memory.max", mem, "max"}, {"", "pids.max", pids, "max"}, {"", "cpuset.cpus", l.Cpuset, ""}}
	}
	cpus := l.Cpuset
	if cpus == "" {
		cpus = inheritCpuset
	}
	return []limitFile{{"cpu", "cpu.cfs_period_us", strconv.Itoa(per), strconv.Itoa(period)},
		{"cpu", "cpu.cfs_quota_us", quota, "-1"}, {"memory", "memory.limit_in_bytes", mem, "-1"},
		{"pids", "pids.max", pids, "max"}, {"cpuset", "cpuset.cpus", cpus, ""}, {"cpuset", "cpuset.mems", inheritCpuset, ""}}
}

// inherited tells whether a fresh v1 cpuset group got its parent's cores and memory nodes
// (clone_children; a parent made by an older trellis lacks it).
func (g *Group) inherited() bool {
	v, err := read(g.dirs["cpuset"], "cpuset.mems")
	return err == nil && v != ""
}

// Place moves process pid (all its threads) into the group.
func (g *Group) Place(pid int) error {
	for c, dir := range g.dirs {
		err := write(dir, "cgroup.procs", strconv.Itoa(pid))
		if c == "cpuset" && errors.Is(err, syscall.ENOSPC) {
			if err = g.fillCpuset(); err == nil {
				err = write(dir, "cgroup.procs", strconv.Itoa(pid))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fillCpuset gives a v1 cpuset group that has no cores or no memory nodes (it takes no process
// then: ENOSPC) its parent's. A fresh group inherits them only if its parent passes them on
// (cgroup.clone_children), which a parent made again meanwhile by another trellis, an older
// one, may not.
func (g *Group) fillCpuset() error {
	dir := g.dirs["cpuset"]
	if err := ensureParent(filepath.Dir(dir), "cpuset"); err != nil {
		return err
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		if v, err := read(dir, f); err != nil || v != "" {
			continue
		}
		v, err := read(filepath.Dir(dir), f)
		if err == nil {
			err = write(dir, f, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// FD opens the group's v2 directory, for starting a process straight into it
// (syscall.SysProcAttr.UseCgroupFD); nil on v1.
func (g *Group) FD() (*os.File, error) {
	if g.h.V2 == "" {
		return nil, nil
	}
	return os.Open(g.dirs[""])
}

// Remove deletes the group once the processes in it are gone (a killed node's take a moment),
// and Parent with its last group; the descriptors Stats kept of its files are closed.
func (g *Group) Remove() error {
	deadline := time.Now().Add(5 * time.Second)
	g.forgetFiles()
	for _, dir := range g.dirs {
		for {
			err := rmdir(dir)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("removing cgroup %s: %w", dir, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		removeIfEmpty(filepath.Dir(dir))
	}
	return nil
}

// dirMu serialises this process's making and removing of group directories. The kernel does
// each under one machine-wide lock (cgroup_mutex), on which concurrent callers spin: a
// 1000-node down spent a seventh of its CPU spinning there, taken from the kernel's own
// freeing of the nodes' namespaces.
var dirMu sync.Mutex

func rmdir(dir string) error {
	dirMu.Lock()
	defer dirMu.Unlock()
	return syscall.Rmdir(dir)
}

// removeIfEmpty removes the group directory dir if no group is left in it. A cgroup
// directory's link count is 2 plus its subdirectories: the count, read without the kernel's
// cgroup lock, spares the rmdir that would take that lock, machine-wide, only to fail while
// other nodes' groups are in it (a 1000-node down tried 5000 such).
func removeIfEmpty(dir string) {
	var st syscall.Stat_t
	if syscall.Lstat(dir, &st) == nil && st.Nlink <= 2 {
		rmdir(dir) // fails if a group was made in it meanwhile
	}
}

// JoinOf moves the calling process into the groups under Parent that process pid is in (a
// node's init): commands run in a node are counted and limited with it.
func (h *Hierarchy) JoinOf(pid int) error {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err
	}
	self := strconv.Itoa(os.Getpid())
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/"+Parent+"/") {
			continue
		}
		var dirs []string
		if parts[0] == "0" && h.V2 != "" {
			dirs = append(dirs, filepath.Join(h.V2, parts[2]))
		}
		for _, c := range strings.Split(parts[1], ",") {
			if m := h.Mounts[c]; m != "" {
				dirs = append(dirs, filepath.Join(m, parts[2]))
			}
		}
		for _, d := range dirs {
			if err := write(d, "cgroup.procs", self); err != nil {
				return err
			}
		}
	}
	return nil
}

// Kill kills every process in the group (what a crash left of a node that does not run).
func (g *Group) Kill() error {
	for _, dir := range g.dirs {
		procs, err := read(dir, "cgroup.procs")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(procs) {
			if pid, err := strconv.Atoi(f); err == nil {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
					return fmt.Errorf("cgroup %s: killing %d: %w", dir, pid, err)
				}
			}
		}
	}
	return nil
}
