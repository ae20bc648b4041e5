package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The classifier and dispatcher of a node with parallel forwarding engines (bpf/engines.c).
// Their filters have fixed handles so that attaching again replaces them in place. The
// classifier is alone on its port's tc egress; the dispatcher alone on its FE port's ingress.
const (
	classifyFilterName   = "trellis_pdp_cls"
	classifyFilterHandle = 0x9c
	dispatchFilterName   = "trellis_pdp_out"
	dispatchFilterHandle = 0x9d
	enginesFilterPrio    = 1
)

// MaxEngineSlots is the size of an Engines' slot table.
const MaxEngineSlots = 4096

// MaxEngineFEs is the most FEs an Engines spreads over.
const MaxEngineFEs = 64

// Dispatch modes of EnginesConfig.
const (
	EngineModeCounter = 0 // slot = a counter: round-robin, weighted
	EngineModeFlow    = 1 // slot = hash of the flow fields
)

// Flow field bits of EnginesConfig.Fields.
const (
	EngineFieldSrc   = 1
	EngineFieldDst   = 2
	EngineFieldProto = 4
	EngineFieldSport = 8
	EngineFieldDport = 16
)

// EnginesConfig is how a node's classifier picks an FE.
type EnginesConfig struct {
	Mode   uint32   // EngineModeCounter or EngineModeFlow
	Slots  []uint32 // the FE of each slot (at most MaxEngineSlots); none: all to the node
	FEs    int      // the number of FEs (copies of ARP replies and neighbour advertisements)
	Fields uint32   // EngineField* bits hashed for IP frames
	Offset uint32   // non-IP frames: the key's bytes
	Length uint32   // 0: non-IP frames go to the node
}

// Engines is the loaded classifier and dispatcher of one node, with their maps. Closing it
// leaves attached filters working (the kernel holds the programs and maps); a new Engines
// attached in their place replaces them.
type Engines struct {
	objs enginesObjects
	cfg  enginesConfig // as last written
}

// LoadEngines loads a node's classifier and dispatcher.
func LoadEngines() (*Engines, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("dataplane: lifting memlock rlimit: %w", err)
	}
	e := &Engines{}
	if err := loadEnginesObjects(&e.objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("dataplane: loading engines programs: %+v", verr)
		}
		return nil, fmt.Errorf("dataplane: loading engines programs: %w", err)
	}
	return e, nil
}

// Close releases the programs and maps held by the process.
func (e *Engines) Close() error { return e.objs.Close() }

// Configure sets the slot table and the flow fields. The slots are written first, then the
// configuration that says how many are in use.
func (e *Engines) Configure(c EnginesConfig) error {
	if len(c.Slots) > MaxEngineSlots || c.FEs > MaxEngineFEs || c.Length > 16 {
		return fmt.Errorf("dataplane: engines: %d slots, %d FEs, key length %d", len(c.Slots), c.FEs, c.Length)
	}
	for i, fe := range c.Slots {
		if err := e.objs.Slots.Put(uint32(i), fe); err != nil {
			return fmt.Errorf("dataplane: engines slot %d: %w", i, err)
		}
	}
	e.cfg = enginesConfig{Mode: c.Mode, Nslots: uint32(len(c.Slots)), Nfes: uint32(c.FEs), Fields: c.Fields, Offset: c.Offset, Length: c.Length,
		AliveUntil: e.cfg.AliveUntil}
	if err := e.objs.Config.Put(uint32(0), e.cfg); err != nil {
		return fmt.Errorf("dataplane: engines config: %w", err)
	}
	return nil
}

// Alive says the FEs are there for d more: until then the classifier sends transit frames to
// them, after it to the node (the holder of the FEs died). Call it again before d is over.
func (e *Engines) Alive(d time.Duration) error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return err
	}
	e.cfg.AliveUntil = uint64(ts.Nano() + d.Nanoseconds())
	if err := e.objs.Config.Put(uint32(0), e.cfg); err != nil {
		return fmt.Errorf("dataplane: engines alive: %w", err)
	}
	return nil
}

// SetPort says which FE ports are the copies of the interface behind the node's port: fes[i]
// is FE i's (0: FE i has none, yet). Frames an FE sends from one of them enter the port.
func (e *Engines) SetPort(port int, fes []int) error {
	for i, fe := range fes {
		k := enginesFeKey{Port: uint32(port), Fe: uint32(i)}
		if fe == 0 {
			if err := e.objs.FePorts.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("dataplane: engines port %d: %w", port, err)
			}
			continue
		}
		if err := e.objs.OutPorts.Put(uint32(fe), uint32(port)); err != nil {
			return fmt.Errorf("dataplane: engines FE port %d: %w", fe, err)
		}
		if err := e.objs.FePorts.Put(k, uint32(fe)); err != nil {
			return fmt.Errorf("dataplane: engines port %d: %w", port, err)
		}
	}
	return nil
}

// SetLocal adds (or, with add false, removes) one of the node's own addresses: frames to it
// go to the node.
func (e *Engines) SetLocal(a netip.Addr, add bool) error {
	k := a.As16()
	if add {
		return e.objs.Local.Put(k, uint8(1))
	}
	if err := e.objs.Local.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// SetRate caps the frames the classifier sees on the node's port (control node's and FEs'
// together) at bitsPerSec, dropping those over it; 0 removes the cap. The bucket holds 20 ms of
// traffic (at least two full frames), as the ports' shapers do.
func (e *Engines) SetRate(port int, bitsPerSec uint64, mtu int) error {
	if bitsPerSec == 0 {
		if err := e.objs.Police.Delete(uint32(port)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dataplane: engines rate on port %d: %w", port, err)
		}
		return nil
	}
	bytes := bitsPerSec / 8
	burst := max(bytes/50, 2*uint64(max(mtu, 1500)+14))
	v := enginesPolice{Rate: bytes, Burst: burst, Tokens: burst * 1e9}
	if err := e.objs.Police.Put(uint32(port), v); err != nil {
		return fmt.Errorf("dataplane: engines rate on port %d: %w", port, err)
	}
	return nil
}

// Policed returns the frames the ports' rate caps dropped so far.
func (e *Engines) Policed() (uint64, error) {
	var per []uint64
	if err := e.objs.Policed.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("dataplane: engines policed: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// Counts returns the frames classified so far: per FE (index i), and to the node (last).
func (e *Engines) Counts() ([]uint64, error) {
	out := make([]uint64, MaxEngineFEs+1)
	for i := range out {
		var per []uint64
		if err := e.objs.Stats.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("dataplane: engines counts: %w", err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}

// AttachClassifier puts the classifier on the tc egress of the node's port.
func (e *Engines) AttachClassifier(port int) error {
	return attachEngines(port, netlink.HANDLE_MIN_EGRESS, classifyFilterHandle, classifyFilterName, e.objs.EnginesClassify)
}

// AttachDispatcher puts the dispatcher on the tc ingress of an FE port.
func (e *Engines) AttachDispatcher(fePort int) error {
	return attachEngines(fePort, netlink.HANDLE_MIN_INGRESS, dispatchFilterHandle, dispatchFilterName, e.objs.EnginesDispatch)
}

// DetachClassifier takes the classifier off a port, if it is there.
func DetachClassifier(port int) error {
	f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: port, Parent: netlink.HANDLE_MIN_EGRESS,
		Handle: classifyFilterHandle, Priority: enginesFilterPrio, Protocol: unix.ETH_P_ALL}}
	if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("dataplane: detach classifier from port %d: %w", port, err)
	}
	return nil
}

// ClassifierAttached tells whether the classifier is on the port's tc egress.
func ClassifierAttached(port int) (bool, error) {
	filters, err := listFilters(&netlink.Handle{}, port, netlink.HANDLE_MIN_EGRESS)
	if err != nil {
		return false, err
	}
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == classifyFilterName {
			return true, nil
		}
	}
	return false, nil
}

func attachEngines(ifindex int, parent, handle uint32, name string, prog *ebpf.Program) error {
	if err := ensureClsact(ifindex); err != nil {
		return fmt.Errorf("dataplane: %s on %d: %w", name, ifindex, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: parent, Handle: handle,
			Priority: enginesFilterPrio, Protocol: unix.ETH_P_ALL},
		Fd: prog.FD(), Name: name, DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return fmt.Errorf("dataplane: %s on %d: %w", name, ifindex, err)
	}
	return nil
}
