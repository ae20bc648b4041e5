package measure

import (
	"encoding/binary"
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
// program of a few instructions: the frames never reach IP, a socket or user space, so counting
// costs the machine almost nothing and the sink never limits what is measured. Other frames
// (IPv6 router solicitations and the like) are dropped uncounted.
//
// Every frame carries the number of the trial that sent it (trialTagOffset); the sink counts only
// frames of the current trial, so that a frame held up in a queue past the end of its trial
// never counts as output of the next one.

const sinkFilterName = "trellis_bench_sink"

// trialTagOffset is where a frame carries its trial's number: the first two bytes of the UDP
// payload, which every setup (the user-space relay too) carries unchanged to the sink.
const trialTagOffset = HeaderLen

var memlockOnce sync.Once

func removeMemlock() { memlockOnce.Do(func() { rlimit.RemoveMemlock() }) }

// Sink is a loaded drop-and-count program, the trial it counts and its per-CPU counters.
type Sink struct {
	counts *ebpf.Map // per-CPU array, one entry: packets and bytes of the current trial
	trial  *ebpf.Map // array, one entry: the current trial's tag as the program loads it
	prog   *ebpf.Program
}

// NewSink loads the sink program; Attach puts it on interfaces.
func NewSink() (s *Sink, err error) {
	removeMemlock()
	s = &Sink{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "bench_sink", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("sink counter map: %w", err)
	}
	if s.trial, err = ebpf.NewMap(&ebpf.MapSpec{Name: "bench_trial", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("sink trial map: %w", err)
	}
	const skbLen, skbProtocol = 0, 16 // offsets in struct __sk_buff
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, skbProtocol, asm.Word),
		asm.JNE.Imm(asm.R2, int32(htons(unix.ETH_P_IP)), "drop"),
		// fp-4: key 0; fp-8: the frame's tag (0 if the frame is too short to carry one).
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R2, asm.Word),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, trialTagOffset),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -8),
		asm.Mov.Imm(asm.R4, 2),
		asm.FnSkbLoadBytes.Call(),
		// R7: the current trial's tag.
		asm.LoadMapPtr(asm.R1, s.trial.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word),
		asm.LoadMem(asm.R2, asm.RFP, -8, asm.Word),
		asm.JNE.Reg(asm.R2, asm.R7, "drop"),
		asm.LoadMapPtr(asm.R1, s.counts.FD()),
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
	if s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_sink", Type: ebpf.SchedCLS, License: "GPL", Instructions: insns}); err != nil {
		return nil, fmt.Errorf("sink program: %w", err)
	}
	return s, nil
}

// SetTrial makes the sink count frames tagged tag (as tagFrame writes it) as the current trial.
func (s *Sink) SetTrial(tag uint16) error {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], tag)
	// The program loads the two bytes, zero-extended, as a word in the machine's byte order.
	if err := s.trial.Update(uint32(0), uint32(binary.NativeEndian.Uint16(b[:])), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("setting the sink's trial: %w", err)
	}
	return nil
}

// tagFrame writes tag into frame f where the sink reads it.
func tagFrame(f []byte, tag uint16) { binary.BigEndian.PutUint16(f[trialTagOffset:], tag) }

// Attach puts the program on the tc ingress of interface ifname in namespace ns. The filter goes
// with the interface; the bench's own reference goes with Close.
func (s *Sink) Attach(ns netns.NsHandle, ifname string) error {
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

// Read returns the packets and bytes of the current trial counted so far, over all CPUs (the
// counts go on from trial to trial).
func (s *Sink) Read() (packets, bytes uint64, err error) {
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

// Close unloads the program (the filters go with their interfaces).
func (s *Sink) Close() {
	s.prog.Close() // nil-safe, as are the maps'
	s.trial.Close()
	s.counts.Close()
}
