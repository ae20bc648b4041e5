package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/kinds"
	"golang.org/x/sys/unix"
)

// Describe asks the guest's agent for its interfaces and reads QEMU's threads from /proc.
func (Kind) Describe(ctx context.Context, env *kinds.Env, in kinds.Instance) (kinds.Detail, error) {
	d := kinds.Detail{Notes: []string{"accel " + Accel()}}
	d.Threads = threads(in.PID)
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
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	var out []kinds.Thread
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
		f := strings.Fields(s[close+2:]) // from field 3 (state) on
		t := kinds.Thread{TID: tid, Name: s[open+1 : close]}
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
