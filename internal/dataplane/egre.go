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
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
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
// if there is none), replacing the shortbridge or EGRE program already
// there. From then on every frame the node sends on that interface leaves
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
func AttachEncap(portIfindex, underlayIfindex int, t Tunnel) error {
	if err := attachEncap(portIfindex, underlayIfindex, t); err != nil {
		return fmt.Errorf("dataplane: attach EGRE encap on port %d (underlay %d, key %#x, %v -> %v): %w",
			portIfindex, underlayIfindex, t.Key, t.Local, t.Remote, err)
	}
	return nil
}

func attachEncap(portIfindex, underlayIfindex int, t Tunnel) error {
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
	if err := specs.RouteTtlNs.Set(uint64(encapRouteTTL().Nanoseconds())); err != nil {
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
	return replaceForwardFilter(h, filter)
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
	var filters []netlink.Filter
	for range 5 {
		filters, err = h.FilterList(link, parent)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return filters, err
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

// Decap is the decapsulation program of one machine's underlay device and
// its map of tunnels. It is safe for concurrent use; several Decaps opened
// on the same program (in this process) also coordinate with each other.
type Decap struct {
	underlay int
	progID   ebpf.ProgramID
	// nl is bound to the network namespace OpenDecap ran in, so that
	// Detach works from any thread.
	nl *netlink.Handle
	// mu serialises map updates of this program; shared (decapLocks).
	mu *sync.Mutex

	tunnels, keys, stats *ebpf.Map

	closeOnce sync.Once
}

// EGRECounters are the counters of a machine's decapsulation program, since
// it was attached.
type EGRECounters struct {
	// Decapsulated counts packets handed to their port.
	Decapsulated uint64
	// UnknownKey counts EGRE packets dropped because no tunnel has their
	// key.
	UnknownKey uint64
	// WrongSource counts EGRE packets dropped because their key belongs to
	// tunnels with other remote machines.
	WrongSource uint64
	// Errors counts packets dropped because a kernel helper failed.
	Errors uint64
}

// OpenDecap finds the decapsulation program attached to the tc ingress of
// the underlay device with index underlayIfindex (filter
// "trellis_egre_dec") and opens its maps by id through the program's info.
// Nothing is pinned on bpffs: the maps live as long as the filter, so a
// restarted trellis finds its tunnels again and a deleted filter or device
// leaves nothing behind.
//
// If there is no such program and create is true, it loads one for the
// local underlay address local and attaches it (adding a clsact qdisc if
// needed); with create false it returns an error matching ErrNoDecap. If a
// program is found and local is valid, local must be the address it was
// created for.
//
// The program passes every packet that is not EGRE for local untouched, so
// the machine's own traffic on the underlay is not affected.
//
// It works in the calling thread's network namespace; the returned Decap
// remembers it (for Detach). Close the Decap when done.
func OpenDecap(underlayIfindex int, local netip.Addr, create bool) (*Decap, error) {
	d, err := openDecap(underlayIfindex, local, create)
	if err != nil {
		return nil, fmt.Errorf("dataplane: open EGRE decap on %d (local %v): %w", underlayIfindex, local, err)
	}
	return d, nil
}

func openDecap(underlayIfindex int, local netip.Addr, create bool) (*Decap, error) {
	if underlayIfindex <= 0 || underlayIfindex > int(^uint32(0)>>1) {
		return nil, fmt.Errorf("invalid underlay ifindex %d", underlayIfindex)
	}
	if local.IsValid() || create {
		if err := checkUnderlayAddr("local", local); err != nil {
			return nil, err
		}
	}

	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	d := &Decap{underlay: underlayIfindex, nl: h}

	decapMu.Lock()
	defer decapMu.Unlock()

	f, err := findIngressFilter(h, underlayIfindex, egreDecapFilterName)
	if err == nil {
		if f != nil {
			err = d.open(ebpf.ProgramID(f.Id), local)
		} else if create {
			err = d.create(local)
		} else {
			err = ErrNoDecap
		}
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	mu := decapLocks[d.progID]
	if mu == nil {
		mu = &sync.Mutex{}
		decapLocks[d.progID] = mu
	}
	d.mu = mu
	return d, nil
}

// open opens the maps of the attached program id.
func (d *Decap) open(id ebpf.ProgramID, local netip.Addr) error {
	maps, err := programMaps(id, egreMapTunnels, egreMapKeys, egreMapDecapStats, ".rodata")
	if err != nil {
		return err
	}
	rodata := maps[".rodata"]
	defer rodata.Close()
	if local.IsValid() {
		have, err := decapLocal(rodata)
		if err != nil {
			for _, m := range maps {
				m.Close()
			}
			return err
		}
		if have != local {
			for _, m := range maps {
				m.Close()
			}
			return fmt.Errorf("the attached decap program is for local address %v", have)
		}
	}
	d.progID = id
	d.tunnels, d.keys, d.stats = maps[egreMapTunnels], maps[egreMapKeys], maps[egreMapDecapStats]
	return nil
}

// decapLocal reads the local_ip constant of a loaded program from its
// .rodata map.
func decapLocal(rodata *ebpf.Map) (netip.Addr, error) {
	_, specs, err := copyEgreSpec()
	if err != nil {
		return netip.Addr{}, err
	}
	buf := make([]byte, rodata.ValueSize())
	if err := rodata.Lookup(uint32(0), buf); err != nil {
		return netip.Addr{}, fmt.Errorf("reading .rodata: %w", err)
	}
	off := specs.LocalIp.Offset
	if int(off)+4 > len(buf) {
		return netip.Addr{}, fmt.Errorf(".rodata of %d bytes has no local_ip at %d", len(buf), off)
	}
	return netip.AddrFrom4([4]byte(buf[off : off+4])), nil
}

// create loads a decap program for local and attaches it.
func (d *Decap) create(local netip.Addr) error {
	spec, specs, err := copyEgreSpec()
	if err != nil {
		return err
	}
	if err := specs.LocalIp.Set(ipv4Word(local)); err != nil {
		return fmt.Errorf("setting local_ip: %w", err)
	}
	var objs struct {
		Prog    *ebpf.Program `ebpf:"egre_decap"`
		Tunnels *ebpf.Map     `ebpf:"tunnels"`
		Keys    *ebpf.Map     `ebpf:"keys"`
		Stats   *ebpf.Map     `ebpf:"decap_stats"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return loadError("EGRE decap", err)
	}
	defer objs.Prog.Close()
	closeMaps := func() {
		objs.Tunnels.Close()
		objs.Keys.Close()
		objs.Stats.Close()
	}
	info, err := objs.Prog.Info()
	if err != nil {
		closeMaps()
		return fmt.Errorf("decap program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		closeMaps()
		return errors.New("kernel does not report program ids")
	}

	if err := ensureClsactOn(d.nl, d.underlay); err != nil {
		closeMaps()
		return err
	}
	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: d.underlay,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    egreDecapFilterHandle,
			Priority:  egreDecapFilterPriority,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           objs.Prog.FD(),
		Name:         egreDecapFilterName,
		DirectAction: true,
	}
	if err := d.nl.FilterReplace(filter); err != nil {
		closeMaps()
		return fmt.Errorf("replacing tc ingress filter: %w", err)
	}
	d.progID = id
	d.tunnels, d.keys, d.stats = objs.Tunnels, objs.Keys, objs.Stats
	return nil
}

// tunnelIntoPeer is TUNNEL_INTO_PEER of egre.c, a flag of the tunnels map's values.
const tunnelIntoPeer = 1

func tunnelMapKey(key uint32, remote netip.Addr) egreTunnelKey {
	return egreTunnelKey{Key: be32(key), RemoteIp: ipv4Word(remote)}
}

// Add makes EGRE packets with key from remote go to the egress of the port
// with index targetIfindex (in the Decap's namespace). With intoPeer (the
// port is a veth whose peer is in a node), untagged IP frames go straight
// into the peer instead, skipping the port's egress and a receive backlog;
// a rate cap of the link is then enforced by the sending machine only.
// Adding a pair that is already there with the same target does nothing;
// with another target it is an error (matching ErrTunnelExists): Delete it
// first.
func (d *Decap) Add(key uint32, remote netip.Addr, targetIfindex int, intoPeer bool) error {
	if err := d.add(key, remote, targetIfindex, intoPeer); err != nil {
		return fmt.Errorf("dataplane: EGRE decap add (key %#x, remote %v, port %d): %w", key, remote, targetIfindex, err)
	}
	return nil
}

func (d *Decap) add(key uint32, remote netip.Addr, targetIfindex int, intoPeer bool) error {
	if err := checkUnderlayAddr("remote", remote); err != nil {
		return err
	}
	if targetIfindex <= 0 || targetIfindex > int(^uint32(0)>>1) {
		return fmt.Errorf("invalid target ifindex %d", targetIfindex)
	}
	k := tunnelMapKey(key, remote)
	v := egreTunnelValue{Ifindex: uint32(targetIfindex)}
	if intoPeer {
		v.Flags = tunnelIntoPeer
	}

	d.mu.Lock()
	defer d.mu.Unlock()

	var old egreTunnelValue
	switch err := d.tunnels.Lookup(&k, &old); {
	case err == nil:
		if old == v {
			return nil
		}
		return fmt.Errorf("%w (to port %d, flags %#x)", ErrTunnelExists, old.Ifindex, old.Flags)
	case !errors.Is(err, ebpf.ErrKeyNotExist):
		return fmt.Errorf("looking up tunnel: %w", err)
	}
	if err := d.tunnels.Update(&k, &v, ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("adding tunnel: %w", err)
	}
	if err := d.adjustKeyCount(k.Key, +1); err != nil {
		// Leave the maps as they were.
		_ = d.tunnels.Delete(&k)
		return err
	}
	return nil
}

// adjustKeyCount adds delta to the number of tunnels with key k (in network
// byte order), removing the entry at zero. Called with d.mu held.
func (d *Decap) adjustKeyCount(k uint32, delta int) error {
	var n uint32
	if err := d.keys.Lookup(&k, &n); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("looking up key count: %w", err)
	}
	next := int64(n) + int64(delta)
	if next <= 0 {
		if err := d.keys.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting key count: %w", err)
		}
		return nil
	}
	n = uint32(next)
	if err := d.keys.Update(&k, &n, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("updating key count: %w", err)
	}
	return nil
}

// Delete removes the tunnel (key, remote); packets of it are dropped (and
// counted) from then on. Deleting a pair that is not there is an error
// matching ErrNoTunnel.
func (d *Decap) Delete(key uint32, remote netip.Addr) error {
	if err := d.delete(key, remote); err != nil {
		return fmt.Errorf("dataplane: EGRE decap delete (key %#x, remote %v): %w", key, remote, err)
	}
	return nil
}

func (d *Decap) delete(key uint32, remote netip.Addr) error {
	if !remote.Is4() {
		return fmt.Errorf("remote address %v is not IPv4", remote)
	}
	k := tunnelMapKey(key, remote)

	d.mu.Lock()
	defer d.mu.Unlock()

	if err := d.tunnels.Delete(&k); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return ErrNoTunnel
		}
		return fmt.Errorf("deleting tunnel: %w", err)
	}
	return d.adjustKeyCount(k.Key, -1)
}

// Len returns the number of tunnels in the map.
func (d *Decap) Len() (int, error) {
	var (
		k egreTunnelKey
		v egreTunnelValue
		n int
	)
	it := d.tunnels.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("dataplane: EGRE decap: iterating tunnels: %w", err)
	}
	return n, nil
}

// Counters reads the program's counters (summed over CPUs).
func (d *Decap) Counters() (EGRECounters, error) {
	var c EGRECounters
	for slot, dst := range []*uint64{&c.Decapsulated, &c.UnknownKey, &c.WrongSource, &c.Errors} {
		v, err := sumPerCPU(d.stats, uint32(slot))
		if err != nil {
			return c, fmt.Errorf("dataplane: EGRE decap counters: %w", err)
		}
		*dst = v
	}
	return c, nil
}

// Detach removes the decapsulation filter from the underlay device, and the
// clsact qdisc too if no other filter (ingress or egress) remains on it, so
// that the host device is left as trellis found it. The maps stay readable
// until Close. Detaching twice is not an error.
func (d *Decap) Detach() error {
	if err := d.detach(); err != nil {
		return fmt.Errorf("dataplane: detach EGRE decap from %d: %w", d.underlay, err)
	}
	return nil
}

func (d *Decap) detach() error {
	decapMu.Lock()
	defer decapMu.Unlock()

	f, err := findIngressFilter(d.nl, d.underlay, egreDecapFilterName)
	if err != nil {
		return err
	}
	if f != nil {
		if err := d.nl.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("deleting filter: %w", err)
		}
	}
	delete(decapLocks, d.progID)

	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		rest, err := listFilters(d.nl, d.underlay, parent)
		if err != nil {
			return fmt.Errorf("listing filters: %w", err)
		}
		if len(rest) > 0 {
			return nil // someone else's filters: keep their clsact
		}
	}
	link, err := d.nl.LinkByIndex(d.underlay)
	if err != nil {
		return err
	}
	qdiscs, err := d.nl.QdiscList(link)
	if err != nil {
		return fmt.Errorf("listing qdiscs: %w", err)
	}
	for _, q := range qdiscs {
		if _, ok := q.(*netlink.Clsact); ok {
			if err := d.nl.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("deleting clsact qdisc: %w", err)
			}
		}
	}
	return nil
}

// Close releases the Decap's maps and netlink socket. The program stays
// attached (see Detach, which must come before Close).
func (d *Decap) Close() error {
	var err error
	d.closeOnce.Do(func() {
		err = errors.Join(d.tunnels.Close(), d.keys.Close(), d.stats.Close())
		d.nl.Close()
	})
	return err
}

// PrimeNeighbour asks the kernel to resolve now the MAC address of the next
// hop towards remote through the underlay device underlayIfindex (remote
// itself, or the gateway of its route), or to refresh an entry that has
// gone stale. The encapsulation program cannot make the kernel resolve a
// neighbour for frames that are not IP (the first frames of a link are
// often ARP), so tunnel set-up primes it; it returns without waiting for
// the answer.
//
// It sends RTM_NEWNEIGH with NTF_USE (what `ip neigh replace ADDR dev DEV
// use` does), which creates the entry if needed and triggers resolution as
// if a packet were waiting. It works in the calling thread's namespace.
func PrimeNeighbour(underlayIfindex int, remote netip.Addr) error {
	if err := primeNeighbour(underlayIfindex, remote); err != nil {
		return fmt.Errorf("dataplane: prime neighbour %v on %d: %w", remote, underlayIfindex, err)
	}
	return nil
}

func primeNeighbour(underlayIfindex int, remote netip.Addr) error {
	if err := checkUnderlayAddr("remote", remote); err != nil {
		return err
	}
	h := &netlink.Handle{}
	dst := net.IP(remote.AsSlice())
	nexthop, dev := dst, underlayIfindex
	routes, err := h.RouteGetWithOptions(dst, &netlink.RouteGetOptions{OifIndex: underlayIfindex})
	if err != nil {
		return fmt.Errorf("no route through the underlay: %w", err)
	}
	if len(routes) > 0 {
		if routes[0].Gw != nil {
			nexthop = routes[0].Gw
		}
		if routes[0].LinkIndex > 0 {
			dev = routes[0].LinkIndex
		}
	}
	err = h.NeighSet(&netlink.Neigh{
		LinkIndex: dev,
		Family:    netlink.FAMILY_V4,
		IP:        nexthop,
		Flags:     netlink.NTF_USE,
	})
	if err != nil {
		return fmt.Errorf("RTM_NEWNEIGH %v NTF_USE: %w", nexthop, err)
	}
	return nil
}
