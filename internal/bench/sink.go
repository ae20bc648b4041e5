package bench

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The sink counts and drops every IPv4 frame at the tc ingress hook of its interface, in an eBPF
// program of ten instructions: the frames never reach IP, a socket or user space, so counting
// costs the machine almost nothing and the sink never limits what is measured. Other frames
// (IPv6 router solicitations and the like) are dropped uncounted.

const sinkFilterName = "trellis_bench_sink"

var memlockOnce sync.Once

// sinkCounter is a loaded drop-and-count program and its per-CPU counters.
type sinkCounter struct {
	counts *ebpf.Map // per-CPU array, one entry: packets, bytes
	prog   *ebpf.Program
}

func newSinkCounter() (*sinkCounter, error) {
	memlockOnce.Do(func() { rlimit.RemoveMemlock() })
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "bench_sink", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("sink counter map: %w", err)
	}
	const skbLen, skbProtocol = 0, 16 // offsets in struct __sk_buff
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, skbProtocol, asm.Word),
		asm.JNE.Imm(asm.R2, int32(htons(unix.ETH_P_IP)), "drop"),
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.LoadMem(asm.R2, asm.R6, skbLen, asm.Word),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("drop"), // TC_ACT_SHOT
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_sink", Type: ebpf.SchedCLS, License: "GPL", Instructions: insns})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("sink program: %w", err)
	}
	return &sinkCounter{counts: m, prog: prog}, nil
}

// attach puts the program on the tc ingress of interface ifname in namespace ns. The filter goes
// with the interface; the bench's own reference goes with Close.
func (s *sinkCounter) attach(ns netns.NsHandle, ifname string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	lk, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("sink interface %s: %w", ifname, err)
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: lk.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("clsact on sink %s: %w", ifname, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: lk.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd:           s.prog.FD(),
		Name:         sinkFilterName,
		DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("sink filter on %s: %w", ifname, err)
	}
	return nil
}

// read returns the packets and bytes counted so far, over all CPUs.
func (s *sinkCounter) read() (packets, bytes uint64, err error) {
	var per [][2]uint64
	if err := s.counts.Lookup(uint32(0), &per); err != nil {
		return 0, 0, fmt.Errorf("reading sink counters: %w", err)
	}
	for _, v := range per {
		packets += v[0]
		bytes += v[1]
	}
	return packets, bytes, nil
}

func (s *sinkCounter) Close() {
	s.prog.Close()
	s.counts.Close()
}
