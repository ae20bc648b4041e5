package dataplane

// EGRE: a virtual link carried between machines as Ethernet over keyed GRE
// over IPv4 (docs/design.md, decision 6), in the wire format of a Linux gretap device
// with a key, so that a host with a kernel gretap device interoperates with
// one running these programs. The GRE kernel modules are not on every host,
// so both directions are eBPF programs (bpf/egre.c):
//
//   - egre_encap, on the tc ingress of a tunnel port (the substrate-side veth
//     end of a node interface whose link continues on another machine): one
//     program per port, with the link's key and the two machines' underlay
//     addresses compiled in as constants.
//   - egre_decap, on the tc ingress of the machine's underlay device: one per
//     machine, whose map of (key, remote address) -> port is the whole
//     demultiplexing step.
//
// Like the shortbridge, the programs are classic tc filters (cls_bpf,
// direct-action, under a clsact qdisc), never pinned: they and their maps
// live exactly as long as the filter (or the device) does.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Identities of the EGRE filters.
//
// The encapsulation filter uses the shortbridge's handle and priority on
// purpose: a port is connected either straight to its peer (shortbridge) or
// to a tunnel, never both, and netlink.FilterReplace matches on parent,
// priority, protocol and handle, so attaching one replaces the other in
// place, without a moment where the port has no program or has two. (The
// impairment filter runs before either, at a priority of its own: see
// forward.go.)
//
// The decapsulation filter sits on a host device that other software may
// also use, hence a handle of its own; priority 1 runs it before filters
// added with the default (higher) priorities.
const (
	egreEncapFilterName     = "trellis_egre_enc"
	egreEncapFilterHandle   = shortbridgeFilterHandle
	egreEncapFilterPriority = shortbridgeFilterPriority

	egreDecapFilterName     = "trellis_egre_dec"
	egreDecapFilterHandle   = 0xe9
	egreDecapFilterPriority = 1

	// EGREOverhead is what EGRE adds to every frame: outer Ethernet (14),
	// IPv4 (20) and GRE with key (8). A tunnel port's MTU, and its node
	// interface's, must be the underlay MTU minus this, since EGRE sets DF
	// and does not fragment.
	EGREOverhead = 42
)

// Sentinel errors of the EGRE API, for errors.Is.
var (
	// ErrNoDecap: the underlay device has no decapsulation program.
	ErrNoDecap = fmt.Errorf("no EGRE decap program attached: %w", fs.ErrNotExist)
	// ErrTunnelExists: the (key, remote) pair already leads to another port.
	ErrTunnelExists = fmt.Errorf("EGRE tunnel already exists: %w", fs.ErrExist)
	// ErrNoTunnel: the (key, remote) pair is not in the decap map.
	ErrNoTunnel = fmt.Errorf("no such EGRE tunnel: %w", fs.ErrNotExist)
)

// Tunnel is one end of an EGRE tunnel, seen from the machine it is on.
type Tunnel struct {
	// Key is the GRE key of the virtual link (one per link and pair of
	// machines); the receiving machine finds the port by it.
	Key uint32
	// Local and Remote are the IPv4 underlay addresses of this machine
	// and of the machine at the other end.
	Local, Remote netip.Addr
}

var (
	egreOnce    sync.Once
	egreSpec    *ebpf.CollectionSpec
	egreSpecErr error
	// egreSpecMu guards the copying of egreSpec (see shortbridgeSpecMu).
	egreSpecMu sync.Mutex

	// decapMu serialises finding, creating and removing decap filters in
	// this process, so that two concurrent OpenDecap calls on one device
	// cannot both create a program (the second would replace the first,
	// whose maps would then be written to in vain).
	decapMu sync.Mutex
	// decapLocks holds one lock per decap program (by kernel program id,
	// unique across network namespaces) for the read-modify-write of its
	// maps, shared by every Decap that opened that program.
	decapLocks = map[ebpf.ProgramID]*sync.Mutex{}
)

// loadEgreSpec parses the embedded ELF once per process.
func loadEgreSpec() (*ebpf.CollectionSpec, error) {
	egreOnce.Do(func() {
		// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; on
		// newer ones (memcg accounting) this is a no-op.
		if err := rlimit.RemoveMemlock(); err != nil {
			egreSpecErr = fmt.Errorf("dataplane: lifting memlock rlimit: %w", err)
			return
		}
		egreSpec, egreSpecErr = loadEgre()
	})
	return egreSpec, egreSpecErr
}

// copyEgreSpec returns a private copy of the EGRE collection, whose
// constants the caller may set.
func copyEgreSpec() (*ebpf.CollectionSpec, *egreSpecs, error) {
	base, err := loadEgreSpec()
	if err != nil {
		return nil, nil, err
	}
	egreSpecMu.Lock()
	spec := base.Copy()
	egreSpecMu.Unlock()

	var specs egreSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, nil, fmt.Errorf("assigning egre spec: %w", err)
	}
	return spec, &specs, nil
}

func loadError(what string, err error) error {
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return fmt.Errorf("loading %s program: %+v", what, verr)
	}
	return fmt.Errorf("loading %s program: %w", what, err)
}

// be32 returns the uint32 whose in-memory (native endian) representation is
// v in network byte order: what the programs compare with packet bytes.
func be32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

func ipv4Word(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

func checkUnderlayAddr(what string, a netip.Addr) error {
	if !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return fmt.Errorf("%s address %v is not a unicast IPv4 address", what, a)
	}
	return nil
}

// AttachEncap loads an encapsulation program for tunnel t and attaches it to
// the tc ingress of the port with index portIfindex (adding a clsact qdisc
// if there is none), replacing the shortbridge (on tcx or under clsact) or
// EGRE program already there. From then on every frame the node sends on that interface leaves
// through the underlay device underlayIfindex (or wherever the route to
// t.Remote leads), inside EGRE with key t.Key from t.Local to t.Remote.
//
// The outer MAC addresses come from the kernel's route and neighbour tables
// (bpf_fib_lookup): each CPU prepares them once and reuses them for
// EncapRouteTTL before it looks the route up again, so route and neighbour
// changes on the underlay apply within that time. While
// the remote's MAC address is not known, IP frames wait for neighbour
// resolution (bpf_redirect_neigh) but other frames (ARP above all) are
// dropped: call PrimeNeighbour when setting a tunnel up.
//
// To let the program ask the kernel for the route as if forwarding a frame
// received on the port, IPv4 forwarding is enabled on the port itself (not
// on the underlay, not globally); this opens nothing, as the program
// consumes every frame that arrives on the port before the IP stack could
// see it.
//
// It works in the calling thread's network namespace, where both devices
// must be. It is safe to call concurrently, for different ports or for the
// same one (the last call wins).
func AttachEncap(c Config, portIfindex, underlayIfindex int, t Tunnel) error {
	if err := attachEncap(c, portIfindex, underlayIfindex, t); err != nil {
		return fmt.Errorf("dataplane: attach EGRE encap on port %d (underlay %d, key %#x, %v -> %v): %w",
			portIfindex, underlayIfindex, t.Key, t.Local, t.Remote, err)
	}
	return nil
}

func attachEncap(c Config, portIfindex, underlayIfindex int, t Tunnel) error {
	if portIfindex <= 0 || portIfindex > int(^uint32(0)>>1) {
		return fmt.Errorf("invalid port ifindex %d", portIfindex)
	}
	if underlayIfindex <= 0 || underlayIfindex > int(^uint32(0)>>1) || underlayIfindex == portIfindex {
		return fmt.Errorf("invalid underlay ifindex %d", underlayIfindex)
	}
	if err := checkUnderlayAddr("local", t.Local); err != nil {
		return err
	}
	if err := checkUnderlayAddr("remote", t.Remote); err != nil {
		return err
	}

	h := &netlink.Handle{} // the calling thread's namespace, at each call
	if err := setIPv4Forwarding(portIfindex); err != nil {
		return err
	}
	if err := ensureClsactOn(h, portIfindex); err != nil {
		return err
	}

	spec, specs, err := copyEgreSpec()
	if err != nil {
		return err
	}
	if err := specs.RouteTtlNs.Set(uint64(c.encapRouteTTL().Nanoseconds())); err != nil {
		return fmt.Errorf("setting route_ttl_ns: %w", err)
	}
	for _, v := range []struct {
		name string
		spec *ebpf.VariableSpec
		val  uint32
	}{
		{"key", specs.Key, be32(t.Key)},
		{"local_ip", specs.LocalIp, ipv4Word(t.Local)},
		{"remote_ip", specs.RemoteIp, ipv4Word(t.Remote)},
		{"underlay_ifindex", specs.UnderlayIfindex, uint32(underlayIfindex)},
	} {
		if err := v.spec.Set(v.val); err != nil {
			return fmt.Errorf("setting %s: %w", v.name, err)
		}
	}

	var objs struct {
		Prog *ebpf.Program `ebpf:"egre_encap"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return loadError("EGRE encap", err)
	}
	// The filter takes its own reference on the program (and so on its
	// counters map); ours is not needed past the attach.
	defer objs.Prog.Close()

	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: portIfindex,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    egreEncapFilterHandle,
			Priority:  egreEncapFilterPriority,
			// Every ethertype: ARP, IPv6 and non-IP frames cross too.
			Protocol: unix.ETH_P_ALL,
		},
		Fd:           objs.Prog.FD(),
		Name:         egreEncapFilterName,
		DirectAction: true,
	}
	if err := replaceForwardFilter(h, filter); err != nil {
		return err
	}
	// A shortbridge on the port's tcx ingress runs before the filter: take it off.
	return detachTCXNamed(portIfindex, shortbridgeProgName)
}

// setIPv4Forwarding enables IPv4 forwarding on one device (the equivalent
// of net.ipv4.conf.DEV.forwarding=1) through rtnetlink, in the calling
// thread's namespace. bpf_fib_lookup answers BPF_FIB_LKUP_RET_FWD_DISABLED
// unless the device it is given has forwarding enabled, whatever the flags.
func setIPv4Forwarding(ifindex int) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)

	afSpec := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
	inet := afSpec.AddRtAttr(unix.AF_INET, nil)
	conf := inet.AddRtAttr(unix.IFLA_INET_CONF, nil)
	// IPV4_DEVCONF_FORWARDING is 1 (include/uapi/linux/ip.h).
	conf.AddRtAttr(1, nl.Uint32Attr(1))
	req.AddData(afSpec)

	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("enabling IPv4 forwarding on port: %w", err)
	}
	return nil
}

// ensureClsactOn adds a clsact qdisc to the device unless it already has
// one (see ensureClsact), through the given netlink handle.
func ensureClsactOn(h *netlink.Handle, ifindex int) error {
	qdisc := &netlink.Clsact{
		QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: ifindex,
			Handle:    netlink.MakeHandle(0xffff, 0),
			Parent:    netlink.HANDLE_CLSACT,
		},
	}
	if err := h.QdiscAdd(qdisc); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("adding clsact qdisc: %w", err)
	}
	return nil
}

// listFilters lists the filters under parent, retrying dumps that the
// kernel reports as interrupted by concurrent changes.
func listFilters(h *netlink.Handle, ifindex int, parent uint32) ([]netlink.Filter, error) {
	link, err := h.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	return netdev.Dump(func() ([]netlink.Filter, error) { return h.FilterList(link, parent) })
}

// findIngressFilter returns the bpf filter called name on the device's tc
// ingress, or nil if there is none.
func findIngressFilter(h *netlink.Handle, ifindex int, name string) (*netlink.BpfFilter, error) {
	filters, err := listFilters(h, ifindex, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return nil, fmt.Errorf("listing ingress filters: %w", err)
	}
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == name {
			return bf, nil
		}
	}
	return nil, nil
}

// programMaps opens the maps of a loaded program by their kernel ids,
// returning those whose names are listed (and closing the others). The
// caller owns the returned maps.
func programMaps(id ebpf.ProgramID, names ...string) (map[string]*ebpf.Map, error) {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return nil, fmt.Errorf("opening program %d: %w", id, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("program %d info: %w", id, err)
	}
	ids, ok := info.MapIDs()
	if !ok {
		return nil, fmt.Errorf("program %d: kernel does not report map ids", id)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	maps := map[string]*ebpf.Map{}
	closeAll := func() {
		for _, m := range maps {
			m.Close()
		}
	}
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("opening map %d of program %d: %w", mid, id, err)
		}
		mi, err := m.Info()
		if err != nil {
			m.Close()
			closeAll()
			return nil, fmt.Errorf("map %d info: %w", mid, err)
		}
		if !want[mi.Name] || maps[mi.Name] != nil {
			m.Close()
			continue
		}
		maps[mi.Name] = m
	}
	for _, n := range names {
		if maps[n] == nil {
			closeAll()
			return nil, fmt.Errorf("program %d has no map %q", id, n)
		}
	}
	return maps, nil
}

// sumPerCPU adds up the per-CPU values of slot in a per-CPU array of uint64.
func sumPerCPU(m *ebpf.Map, slot uint32) (uint64, error) {
	var vals []uint64
	if err := m.Lookup(slot, &vals); err != nil {
		return 0, err
	}
	var sum uint64
	for _, v := range vals {
		sum += v
	}
	return sum, nil
}

// EncapCounters are the counters of one tunnel port's encapsulation
// program, since it was attached.
type EncapCounters struct {
	// Encapsulated counts frames sent into the tunnel.
	Encapsulated uint64
	// NoRoute counts frames dropped because there was no route to the
	// remote machine, or (for frames other than IP) no neighbour entry.
	NoRoute uint64
	// Errors counts frames dropped because a kernel helper failed or the
	// frame cannot be carried (more than two VLAN tags; a GSO packet that
	// adjust_room refuses). The route lookup failing with "forwarding
	// disabled" counts here too: setting net.ipv4.conf.all.forwarding
	// rewrites every device's value, the port's included, and a 0 there
	// stops the tunnel until AttachEncap runs again.
	Errors uint64
}

// ReadEncapCounters reads the counters of the encapsulation program on the
// port with index portIfindex, in the calling thread's network namespace.
func ReadEncapCounters(portIfindex int) (EncapCounters, error) {
	var c EncapCounters
	f, err := findIngressFilter(&netlink.Handle{}, portIfindex, egreEncapFilterName)
	if err == nil && f == nil {
		err = fmt.Errorf("no EGRE encap program attached: %w", fs.ErrNotExist)
	}
	if err != nil {
		return c, fmt.Errorf("dataplane: EGRE encap counters of port %d: %w", portIfindex, err)
	}
	maps, err := programMaps(ebpf.ProgramID(f.Id), egreMapEncapStats)
	if err != nil {
		return c, fmt.Errorf("dataplane: EGRE encap counters of port %d: %w", portIfindex, err)
	}
	stats := maps[egreMapEncapStats]
	defer stats.Close()
	for slot, dst := range []*uint64{&c.Encapsulated, &c.NoRoute, &c.Errors} {
		if *dst, err = sumPerCPU(stats, uint32(slot)); err != nil {
			return c, fmt.Errorf("dataplane: EGRE encap counters of port %d: %w", portIfindex, err)
		}
	}
	return c, nil
}
