package dataplane

// The decapsulation side of EGRE (see egre.go): the one program per machine on the underlay
// device, its map of tunnels, and the priming of underlay neighbours for new tunnels. The same
// program vets the packets of trellis's VXLAN devices (vxlan_guard.go).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

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
	vxPeers, vxVNIs      *ebpf.Map // vxlan_guard.go

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
	// VXLANRefused counts VXLAN packets dropped because their VNI belongs
	// to tunnels with other remote machines (or they were cut too short to
	// tell).
	VXLANRefused uint64
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
	maps, err := programMaps(id, egreMapTunnels, egreMapKeys, egreMapDecapStats, egreMapVxlanPeers, egreMapVxlanVnis, ".rodata")
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
	d.vxPeers, d.vxVNIs = maps[egreMapVxlanPeers], maps[egreMapVxlanVnis]
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
	var l3 uint32
	if decapL3() {
		l3 = 1
	}
	if err := specs.DecapL3.Set(l3); err != nil {
		return fmt.Errorf("setting decap_l3: %w", err)
	}
	var objs struct {
		Prog    *ebpf.Program `ebpf:"egre_decap"`
		Tunnels *ebpf.Map     `ebpf:"tunnels"`
		Keys    *ebpf.Map     `ebpf:"keys"`
		Stats   *ebpf.Map     `ebpf:"decap_stats"`
		VxPeers *ebpf.Map     `ebpf:"vxlan_peers"`
		VxVNIs  *ebpf.Map     `ebpf:"vxlan_vnis"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return loadError("EGRE decap", err)
	}
	defer objs.Prog.Close()
	closeMaps := func() {
		objs.Tunnels.Close()
		objs.Keys.Close()
		objs.Stats.Close()
		objs.VxPeers.Close()
		objs.VxVNIs.Close()
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
	d.vxPeers, d.vxVNIs = objs.VxPeers, objs.VxVNIs
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
	return adjustCount(d.keys, k, delta)
}

// adjustCount adds delta to the count of k in counts, removing the entry at
// zero. Called with d.mu held.
func adjustCount(counts *ebpf.Map, k uint32, delta int) error {
	var n uint32
	if err := counts.Lookup(&k, &n); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("looking up key count: %w", err)
	}
	next := int64(n) + int64(delta)
	if next <= 0 {
		if err := counts.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting key count: %w", err)
		}
		return nil
	}
	n = uint32(next)
	if err := counts.Update(&k, &n, ebpf.UpdateAny); err != nil {
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

// Len returns the number of tunnels the program serves: EGRE tunnels and
// VXLAN peers.
func (d *Decap) Len() (int, error) {
	n := 0
	for _, m := range []*ebpf.Map{d.tunnels, d.vxPeers} {
		var k egreTunnelKey
		it := m.Iterate()
		for v := make([]byte, m.ValueSize()); it.Next(&k, v); {
			n++
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("dataplane: EGRE decap: iterating %s: %w", m, err)
		}
	}
	return n, nil
}

// Counters reads the program's counters (summed over CPUs).
func (d *Decap) Counters() (EGRECounters, error) {
	var c EGRECounters
	for slot, dst := range []*uint64{&c.Decapsulated, &c.UnknownKey, &c.WrongSource, &c.Errors, &c.VXLANRefused} {
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
		err = errors.Join(d.tunnels.Close(), d.keys.Close(), d.stats.Close(), d.vxPeers.Close(), d.vxVNIs.Close())
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
