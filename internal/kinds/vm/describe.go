package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/kinds"
	"golang.org/x/sys/unix"
)

// Describe asks the guest's agent for its interfaces and reads QEMU's threads from /proc.
func (Kind) Describe(ctx context.Context, env *kinds.Env, in kinds.Instance) (kinds.Detail, error) {
	d := kinds.Detail{Notes: []string{"accel " + Accel()}}
	d.Threads = threads(in.PID)
	if note := quotaNote(env.Plan.Node(in.Name)); note != "" {
		d.Notes = append(d.Notes, note)
	}
	if note := engineNote(env, in.Name); note != "" {
		d.Notes = append(d.Notes, note)
	}
	if n := env.Plan.Node(in.Name); n != nil && !knobs(n.Node).Agent() {
		d.Notes = append(d.Notes, "the user's own initrd or disk: no trellis agent")
		return d, nil
	}
	c, err := dial(ctx, env, in.Name)
	if err != nil {
		return d, err
	}
	defer c.Close()
	r, err := c.Do(ctx, &guest.Request{Op: "links"})
	if err != nil {
		return d, err
	}
	d.Interfaces = r.Links
	return d, nil
}

var policies = map[int]string{0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}

// threads lists a process's threads: name, last CPU, affinity, policy and priority.
func threads(pid int) []kinds.Thread {
	var out []kinds.Thread
	for _, ts := range taskStats(pid) {
		tid, f := ts.tid, ts.fields
		t := kinds.Thread{TID: tid, Name: ts.name}
		if len(f) > 38 {
			t.CPU, _ = strconv.Atoi(f[36])      // field 39, processor
			t.Priority, _ = strconv.Atoi(f[37]) // field 40, rt_priority
			pol, _ := strconv.Atoi(f[38])       // field 41, policy
			t.Policy = policies[pol]
		}
		var set unix.CPUSet
		if unix.SchedGetaffinity(tid, &set) == nil {
			t.Affinity = cpuList(&set)
		}
		t.Reserve = reservation(tid)
		out = append(out, t)
	}
	return out
}

// taskStat is one thread's /proc/PID/task/TID/stat: its name, and its fields from the third
// (state) on.
type taskStat struct {
	tid    int
	name   string
	fields []string
}

func taskStats(pid int) []taskStat {
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	var out []taskStat
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		s := string(data)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		out = append(out, taskStat{tid: tid, name: s[open+1 : close], fields: strings.Fields(s[close+2:])})
	}
	return out
}

// ThreadCPU returns the CPU time QEMU process pid's threads have used, by role ("vcpu", "io",
// "other"; see ThreadRole).
func ThreadCPU(pid int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, ts := range taskStats(pid) {
		if len(ts.fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(ts.fields[11], 10, 64) // field 14
		stime, _ := strconv.ParseInt(ts.fields[12], 10, 64) // field 15
		role := ThreadRole(pid, ts.tid, ts.name)
		if role == "" {
			role = "other"
		}
		out[role] += time.Duration(utime+stime) * time.Second / 100 // USER_HZ
	}
	return out
}

// cpuList writes a CPU set as the kernel does: 0-3,6.
func cpuList(set *unix.CPUSet) string {
	var parts []string
	for cpu := 0; cpu < 1024; cpu++ {
		if !set.IsSet(cpu) {
			continue
		}
		end := cpu
		for end+1 < 1024 && set.IsSet(end+1) {
			end++
		}
		if end == cpu {
			parts = append(parts, strconv.Itoa(cpu))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpu, end))
		}
		cpu = end
	}
	return strings.Join(parts, ",")
}
