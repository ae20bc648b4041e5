package dataplane

// The LAN connector (bpf/lan.c): one program on the tc ingress of every member
// of a LAN (ports and tunnel devices), with a learning forwarding table shared
// by all of them. The maps of a LAN are not pinned: they live as long as a
// member's filter holds a program that uses them, and AttachLAN finds them
// again through the program of any member that has one (by the filter's
// program id), so that attaching again, from this process or another one,
// updates the LAN in place and keeps what it learnt.

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	lanFilterName   = "trellis_lan"
	lanFilterHandle = shortbridgeFilterHandle // the forwarding slot of a port (forward.go)

	// MaxLANMembers is how many members (ports and tunnel devices) one LAN can have.
	MaxLANMembers = 4096
	// DefaultLANEntries is the default size of a LAN's forwarding table.
	DefaultLANEntries = 4096
	// DefaultLANAging is the default time after which a learnt address is forgotten, as for a
	// Linux bridge.
	DefaultLANAging = 300 * time.Second

	lanMemberTunnel = 1
	lanMemberPeer   = 2
)

// Sentinel errors of the LAN API.
var (
	// ErrLANMembers: a LAN with no member, too many, or a member given twice.
	ErrLANMembers = errors.New("invalid LAN members")
	// ErrNoLAN: the device has no LAN program.
	ErrNoLAN = errors.New("no LAN program attached")
)

// LANMember is one member of a LAN: a port or a tunnel device, in the calling thread's
// network namespace.
type LANMember struct {
	Ifindex int
	// Tunnel marks a tunnel device to other machines: what comes from one is never sent into
	// another (split horizon).
	Tunnel bool
	// Peer delivers unicast frames straight into the node behind the port (bpf_redirect_peer),
	// skipping the port's egress: for the veth ports of an uncapped LAN. Floods, and every
	// frame to a member without Peer, leave through the member's egress (its shaper).
	Peer bool
}

func (m LANMember) flags() uint32 {
	var f uint32
	if m.Tunnel {
		f |= lanMemberTunnel
	}
	if m.Peer {
		f |= lanMemberPeer
	}
	return f
}

// LANOptions are the forwarding table's settings.
type LANOptions struct {
	// MaxEntries limits the table: when it is full, the least recently used address is
	// forgotten to learn a new one (frames to a forgotten address are flooded). 0 means
	// DefaultLANEntries. Changing it starts the table anew.
	MaxEntries int
	// Aging is how long an address is kept after the last frame from it. 0 means
	// DefaultLANAging.
	Aging time.Duration
}

// lanShared are the shared maps of one LAN.
type lanShared struct {
	fdb, members, conf, stats *ebpf.Map
}

func (m *lanShared) close() {
	for _, x := range []*ebpf.Map{m.fdb, m.members, m.conf, m.stats} {
		if x != nil {
			x.Close()
		}
	}
}

var (
	lanOnce    sync.Once
	lanSpec    *ebpf.CollectionSpec
	lanSpecErr error
	lanSpecMu  sync.Mutex // guards copying lanSpec (see shortbridgeSpecMu)
)

func copyLANSpec() (*ebpf.CollectionSpec, error) {
	lanOnce.Do(func() {
		if err := rlimit.RemoveMemlock(); err != nil {
			lanSpecErr = fmt.Errorf("lifting memlock rlimit: %w", err)
			return
		}
		lanSpec, lanSpecErr = loadLan()
	})
	if lanSpecErr != nil {
		return nil, lanSpecErr
	}
	lanSpecMu.Lock()
	defer lanSpecMu.Unlock()
	return lanSpec.Copy(), nil
}

// AttachLAN makes members one LAN: it puts the LAN program on the tc ingress of each (in the
// forwarding slot, replacing a shortbridge or an earlier LAN program in place) and sets the
// LAN's member list and table settings. Called again with other members or options, it
// updates the LAN in place: the table keeps what it learnt, less the addresses of members
// that left or whose delivery changed. Members that left must be detached by the caller
// (DetachForwarding), or deleted.
func AttachLAN(members []LANMember, opt LANOptions) error {
	if err := attachLAN(members, opt); err != nil {
		return fmt.Errorf("dataplane: attach LAN (%d members): %w", len(members), err)
	}
	return nil
}

func attachLAN(members []LANMember, opt LANOptions) error {
	if err := checkLANMembers(members); err != nil {
		return err
	}
	if opt.MaxEntries == 0 {
		opt.MaxEntries = DefaultLANEntries
	}
	if opt.Aging == 0 {
		opt.Aging = DefaultLANAging
	}
	if opt.MaxEntries < 0 || opt.Aging < 0 {
		return fmt.Errorf("%w: negative table size %d or ageing %v", ErrLANMembers, opt.MaxEntries, opt.Aging)
	}
	spec, err := copyLANSpec()
	if err != nil {
		return err
	}
	h := &netlink.Handle{}
	maps, err := lanMapsOf(h, members, spec, opt.MaxEntries)
	if err != nil {
		return err
	}
	defer maps.close()
	if err := setLANMembers(maps, members, opt.Aging); err != nil {
		return err
	}
	return attachLANPrograms(h, spec, maps, members)
}

func checkLANMembers(members []LANMember) error {
	if len(members) == 0 || len(members) > MaxLANMembers {
		return fmt.Errorf("%w: %d members, want 1 to %d", ErrLANMembers, len(members), MaxLANMembers)
	}
	seen := map[int]bool{}
	for _, m := range members {
		if m.Ifindex <= 0 || m.Ifindex > int(^uint32(0)>>1) || seen[m.Ifindex] {
			return fmt.Errorf("%w: ifindex %d invalid or given twice", ErrLANMembers, m.Ifindex)
		}
		if m.Tunnel && m.Peer {
			return fmt.Errorf("%w: ifindex %d: a tunnel has no node to deliver into", ErrLANMembers, m.Ifindex)
		}
		seen[m.Ifindex] = true
	}
	return nil
}

// lanMapsOf returns the maps of the LAN that a member's program uses, or new ones if no
// member has a LAN program or the table's size changed.
func lanMapsOf(h *netlink.Handle, members []LANMember, spec *ebpf.CollectionSpec, entries int) (*lanShared, error) {
	for _, m := range members {
		f, err := findIngressFilter(h, m.Ifindex, lanFilterName)
		if err != nil {
			return nil, fmt.Errorf("member %d: %w", m.Ifindex, err)
		}
		if f == nil {
			continue
		}
		found, err := programMaps(ebpf.ProgramID(f.Id), "fdb", "members", "conf", "stats")
		if err != nil {
			return nil, err
		}
		maps := &lanShared{fdb: found["fdb"], members: found["members"], conf: found["conf"], stats: found["stats"]}
		if int(maps.fdb.MaxEntries()) == entries {
			return maps, nil
		}
		maps.close()
		break
	}
	spec.Maps["fdb"].MaxEntries = uint32(entries)
	maps := &lanShared{}
	for name, dst := range map[string]**ebpf.Map{"fdb": &maps.fdb, "members": &maps.members, "conf": &maps.conf, "stats": &maps.stats} {
		m, err := ebpf.NewMap(spec.Maps[name])
		if err != nil {
			maps.close()
			return nil, fmt.Errorf("creating map %s: %w", name, err)
		}
		*dst = m
	}
	return maps, nil
}

// setLANMembers writes the member list and the ageing time, and forgets the addresses learnt
// on members that left or whose delivery changed.
func setLANMembers(maps *lanShared, members []LANMember, aging time.Duration) error {
	var c lanConf
	if err := maps.conf.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("reading the LAN's settings: %w", err)
	}
	old := int(c.Size)
	flags := map[uint32]uint32{}
	for i, m := range members {
		flags[uint32(m.Ifindex)] = m.flags()
		v := lanMember{Ifindex: uint32(m.Ifindex), Flags: m.flags()}
		if err := maps.members.Put(uint32(i), &v); err != nil {
			return fmt.Errorf("writing member %d: %w", i, err)
		}
	}
	c = lanConf{AgingNs: uint64(aging), Size: uint32(len(members))}
	if err := maps.conf.Put(uint32(0), &c); err != nil {
		return fmt.Errorf("writing the LAN's settings: %w", err)
	}
	for i := len(members); i < old && i < MaxLANMembers; i++ {
		if err := maps.members.Put(uint32(i), &lanMember{}); err != nil {
			return fmt.Errorf("clearing member %d: %w", i, err)
		}
	}
	var (
		k     uint64
		e     lanFdbEntry
		stale []uint64
	)
	it := maps.fdb.Iterate()
	for it.Next(&k, &e) {
		if f, ok := flags[e.Ifindex]; !ok || f != e.Flags {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the forwarding table: %w", err)
	}
	for _, k := range stale {
		if err := maps.fdb.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forgetting an address: %w", err)
		}
	}
	return nil
}

// attachLANPrograms loads one program per kind of member (its flags are a constant of the
// program) over the LAN's maps, and puts it on each member's tc ingress.
func attachLANPrograms(h *netlink.Handle, base *ebpf.CollectionSpec, maps *lanShared, members []LANMember) error {
	progs := map[uint32]*ebpf.Program{}
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	for _, m := range members {
		prog := progs[m.flags()]
		if prog == nil {
			var err error
			if prog, err = loadLANProgram(base, maps, m.flags()); err != nil {
				return err
			}
			progs[m.flags()] = prog
		}
		if err := ensureClsactOn(h, m.Ifindex); err != nil {
			return fmt.Errorf("member %d: %w", m.Ifindex, err)
		}
		filter := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{
				LinkIndex: m.Ifindex,
				Parent:    netlink.HANDLE_MIN_INGRESS,
				Handle:    lanFilterHandle,
				Priority:  forwardFilterPriority,
				Protocol:  unix.ETH_P_ALL, // every ethertype crosses
			},
			Fd:           prog.FD(),
			Name:         lanFilterName,
			DirectAction: true,
		}
		if err := replaceForwardFilter(h, filter); err != nil {
			return fmt.Errorf("member %d: %w", m.Ifindex, err)
		}
		// A shortbridge on the member's tcx ingress would run before the filter.
		if err := detachTCXNamed(m.Ifindex, shortbridgeProgName); err != nil {
			return fmt.Errorf("member %d: %w", m.Ifindex, err)
		}
	}
	return nil
}

func loadLANProgram(base *ebpf.CollectionSpec, maps *lanShared, flags uint32) (*ebpf.Program, error) {
	spec := base.Copy()
	var specs lanSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("assigning LAN spec: %w", err)
	}
	if err := specs.SelfFlags.Set(flags); err != nil {
		return nil, fmt.Errorf("setting self_flags: %w", err)
	}
	spec.Maps["fdb"].MaxEntries = maps.fdb.MaxEntries()
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"fdb": maps.fdb, "members": maps.members, "conf": maps.conf, "stats": maps.stats}}
	var objs struct {
		Prog *ebpf.Program `ebpf:"lan"`
	}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		return nil, loadError("LAN", err)
	}
	return objs.Prog, nil
}

// LANEntry is an address in a LAN's forwarding table.
type LANEntry struct {
	MAC     net.HardwareAddr
	Ifindex int           // the member it was learnt on
	Idle    time.Duration // since the last frame from it
}

// LANCounters are a LAN's counters since its maps were made.
type LANCounters struct {
	Unicast  uint64 // frames sent to the member their destination was learnt on
	Flooded  uint64 // broadcast, multicast and unknown destinations, sent to every other member
	Filtered uint64 // frames for the member they came from, or from a tunnel for a tunnel
	Learnt   uint64 // addresses learnt, or moved to another member
}

// ReadLAN reads the forwarding table and the counters of the LAN whose member is the device
// with index ifindex, in the calling thread's network namespace.
func ReadLAN(ifindex int) ([]LANEntry, LANCounters, error) {
	var c LANCounters
	f, err := findIngressFilter(&netlink.Handle{}, ifindex, lanFilterName)
	if err == nil && f == nil {
		err = ErrNoLAN
	}
	if err != nil {
		return nil, c, fmt.Errorf("dataplane: LAN of device %d: %w", ifindex, err)
	}
	found, err := programMaps(ebpf.ProgramID(f.Id), "fdb", "stats")
	if err != nil {
		return nil, c, fmt.Errorf("dataplane: LAN of device %d: %w", ifindex, err)
	}
	defer found["fdb"].Close()
	defer found["stats"].Close()
	for slot, dst := range []*uint64{&c.Unicast, &c.Flooded, &c.Filtered, &c.Learnt} {
		if *dst, err = sumPerCPU(found["stats"], uint32(slot)); err != nil {
			return nil, c, fmt.Errorf("dataplane: LAN counters of device %d: %w", ifindex, err)
		}
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return nil, c, err
	}
	now := uint64(ts.Nano())
	var (
		k   uint64
		e   lanFdbEntry
		out []LANEntry
	)
	it := found["fdb"].Iterate()
	for it.Next(&k, &e) {
		mac := make(net.HardwareAddr, 8)
		for i := range mac {
			mac[i] = byte(k >> (8 * i))
		}
		idle := time.Duration(0)
		if now > e.Seen {
			idle = time.Duration(now - e.Seen)
		}
		out = append(out, LANEntry{MAC: mac[:6], Ifindex: int(e.Ifindex), Idle: idle})
	}
	if err := it.Err(); err != nil {
		return nil, c, fmt.Errorf("dataplane: LAN table of device %d: %w", ifindex, err)
	}
	return out, c, nil
}
