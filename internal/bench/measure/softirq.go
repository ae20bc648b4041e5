package measure

// The CPU cost of forwarding is the time the forwarding CPU spends in the NET_RX softirq,
// counted by two eBPF programs on the tracepoints irq:softirq_entry and irq:softirq_exit
// (bpf/softirq.c). The generated softirq_bpfel.go and softirq_bpfel.o are committed, so
// building trellis needs only Go; regenerating needs clang, llvm-strip and libbpf's headers
// (Debian: clang llvm libbpf-dev), as for internal/dataplane.
//
//go:generate go tool bpf2go -tags linux -target bpfel softirq bpf/softirq.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"golang.org/x/sys/unix"
)

// Softirq vectors (include/linux/interrupt.h).
const (
	SoftirqNetTX = 2
	SoftirqNetRX = 3
	nrSoftirqs   = 10
)

// SoftirqMeter counts the time every CPU spends in every softirq vector, while it is open.
type SoftirqMeter struct {
	objs  softirqObjects
	links []link.Link
	NCPU  int // possible CPUs: samples have one row per CPU
}

// SoftirqSample is the meter's totals at one instant: per CPU, per vector.
type SoftirqSample struct {
	ns, count, taskNS [][nrSoftirqs]uint64 // [cpu][vec]
}

// NewSoftirqMeter loads the programs and attaches them to the two tracepoints.
func NewSoftirqMeter() (*SoftirqMeter, error) {
	removeMemlock()
	m := &SoftirqMeter{}
	if err := loadSoftirqObjects(&m.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the softirq counters: %w", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		m.Close()
		return nil, err
	}
	m.NCPU = ncpu
	err = withTracefs(func() error {
		for _, p := range []struct {
			name string
			prog *ebpf.Program
		}{{"softirq_entry", m.objs.SoftirqEntry}, {"softirq_exit", m.objs.SoftirqExit}} {
			l, err := link.Tracepoint("irq", p.name, p.prog, nil)
			if err != nil {
				return fmt.Errorf("attaching to the tracepoint irq:%s: %w", p.name, err)
			}
			m.links = append(m.links, l)
		}
		return nil
	})
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// withTracefs runs f where tracefs is mounted: link.Tracepoint reads the tracepoint's id from
// it. Where no tracefs is mounted (a minimal system), f runs on a thread of its own with a
// private mount namespace that has tracefs on /sys/kernel/tracing; nothing is mounted anywhere
// else, and the thread is thrown away afterwards (netnsutil.WithPrivateMount, as netnsutil.SetRPS does with sysfs). The attached
// perf event does not need tracefs once it is open.
func withTracefs(f func() error) error {
	var st unix.Statfs_t
	if unix.Statfs("/sys/kernel/tracing", &st) == nil && st.Type == unix.TRACEFS_MAGIC {
		return f()
	}
	if unix.Statfs("/sys/kernel/debug/tracing", &st) == nil && (st.Type == unix.TRACEFS_MAGIC || st.Type == unix.DEBUGFS_MAGIC) {
		return f()
	}
	return netnsutil.WithPrivateMount(func() error { return nil }, "tracefs", "/sys/kernel/tracing", f)
}

// Watch makes the meter count apart the softirq time that runs on top of process tgid (0:
// none).
func (m *SoftirqMeter) Watch(tgid int) error {
	return m.objs.Watch.Put(uint32(0), uint32(tgid))
}

// Read returns the totals so far.
func (m *SoftirqMeter) Read() (SoftirqSample, error) {
	s := SoftirqSample{
		ns:     make([][nrSoftirqs]uint64, m.NCPU),
		count:  make([][nrSoftirqs]uint64, m.NCPU),
		taskNS: make([][nrSoftirqs]uint64, m.NCPU),
	}
	for vec := uint32(0); vec < nrSoftirqs; vec++ {
		var per []softirqSoftirqTime
		if err := m.objs.SoftirqTimes.Lookup(vec, &per); err != nil {
			return s, fmt.Errorf("reading the softirq counters: %w", err)
		}
		for cpu, v := range per {
			if cpu < m.NCPU {
				s.ns[cpu][vec], s.count[cpu][vec], s.taskNS[cpu][vec] = v.Ns, v.Count, v.TaskNs
			}
		}
	}
	return s, nil
}

// Since returns the time spent in vector vec on cpu between an earlier sample and s, and the
// part of it that ran on top of the watched task.
func (s SoftirqSample) Since(earlier SoftirqSample, cpu, vec int) (ns, taskNS uint64) {
	if cpu < 0 || cpu >= len(s.ns) || cpu >= len(earlier.ns) {
		return 0, 0
	}
	return s.ns[cpu][vec] - earlier.ns[cpu][vec], s.taskNS[cpu][vec] - earlier.taskNS[cpu][vec]
}

// Close detaches and unloads the programs.
func (m *SoftirqMeter) Close() error {
	var errs []error
	for _, l := range m.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, m.objs.Close())
	return errors.Join(errs...)
}
