package vm

import (
	"fmt"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

// The scheduling policies of sched_setattr(2).
const (
	schedFIFO     = 1
	schedDeadline = 6
)

// tune applies a VM's knobs to QEMU's threads: affinity, SCHED_FIFO priorities and a
// SCHED_DEADLINE reservation for each vCPU thread. It is applied again after a port is
// hot-plugged, since vhost threads come with ports.
func tune(pid int, s *spec.VMSettings) error {
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
		case role == "vcpu" && s.Reserve > 0:
			period := uint64(s.Period)
			attr.Policy, attr.Period, attr.Deadline = schedDeadline, period, period
			attr.Runtime = uint64(float64(period) * s.Reserve)
		case prio > 0:
			attr.Policy, attr.Priority = schedFIFO, uint32(prio)
		default:
			continue
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
