package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The scheduling policies of sched_setattr(2).
const (
	schedFIFO     = 1
	schedDeadline = 6
)

// tune applies a VM's knobs to QEMU's threads: affinity, SCHED_FIFO priorities and a
// SCHED_DEADLINE reservation for each vCPU thread (pinned vCPUs have theirs as their cgroup's
// CPU quota instead, limits.go). It is applied again after a port is
// hot-plugged, since vhost threads come with ports.
func tune(pid int, s *Settings) error {
	if s == nil {
		return nil
	}
	for _, t := range threads(pid) {
		role := ThreadRole(pid, t.TID, t.Name)
		if role == "" {
			continue
		}
		pin, prio := s.PinIO, s.PrioIO
		if role == "vcpu" {
			pin, prio = s.PinVCPU, s.PrioVCPU
		}
		if err := setAffinity(t.TID, pin); err != nil {
			return fmt.Errorf("pinning %s thread %q: %w", role, t.Name, err)
		}
		attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr}
		switch {
		case role == "vcpu" && s.Reserve > 0 && !quotaReserve(s): // else the cgroup's quota
			period := uint64(s.Period)
			attr.Policy, attr.Period, attr.Deadline = schedDeadline, period, period
			attr.Runtime = uint64(float64(period) * s.Reserve)
		case prio > 0:
			attr.Policy, attr.Priority = schedFIFO, uint32(prio)
		default:
			continue
		}
		if attr.Policy == schedFIFO {
			if err := realtimeAllowed(t.TID); err != nil {
				return fmt.Errorf("%s thread %q out of its CPU group: %w", role, t.Name, err)
			}
		}
		if err := unix.SchedSetAttr(t.TID, attr, 0); err != nil {
			return fmt.Errorf("scheduling %s thread %q (policy %d): %w", role, t.Name, attr.Policy, err)
		}
	}
	return nil
}

// ThreadRole says what thread tid, named name, of QEMU process pid does: "vcpu" (a vCPU, named
// "CPU n/KVM" or "CPU n/TCG" with debug-threads), "io" (the main loop, I/O threads, vhost
// workers), or "" (helpers).
func ThreadRole(pid, tid int, name string) string {
	switch {
	case strings.HasPrefix(name, "CPU "):
		return "vcpu"
	case tid == pid, strings.HasPrefix(name, "IO "), strings.HasPrefix(name, "vhost-"):
		return "io"
	}
	return ""
}

func setAffinity(tid int, cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return unix.SchedSetaffinity(tid, &set)
}

// reservation describes a thread's SCHED_DEADLINE reservation, e.g. "5ms/10ms", or "".
func reservation(tid int) string {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil || attr.Policy != schedDeadline {
		return ""
	}
	return fmt.Sprintf("%s/%s", time.Duration(attr.Runtime), time.Duration(attr.Period))
}

// realtimeAllowed lets thread tid of a QEMU in its control group take SCHED_FIFO. With cgroup
// v1 and RT group scheduling (CONFIG_RT_GROUP_SCHED), the kernel refuses a real-time policy to
// a thread in a CPU group without real-time runtime, which a VM's group has not: the thread
// goes back to the root CPU group (v1 moves single threads), where a CFS quota would not have
// bounded it anyway. Its memory and pids groups stay.
func realtimeAllowed(tid int) error {
	h, err := hierarchy()
	if err != nil || h.V2 != "" || h.Mounts["cpu"] == "" {
		return nil
	}
	root := h.Mounts["cpu"]
	if _, err := os.Stat(filepath.Join(root, "cpu.rt_runtime_us")); err != nil {
		return nil
	}
	return os.WriteFile(filepath.Join(root, "tasks"), []byte(strconv.Itoa(tid)), 0o644)
}
