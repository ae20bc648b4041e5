package dataplane

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The filter that holds a node's own program on each of its ports' tc egress: alone there (a
// node with a program has no engines, whose classifier uses the same place), with a fixed
// handle so that attaching again replaces it in place.
const (
	userFilterName   = "trellis_dp"
	userFilterHandle = 0x9e
	userFilterPrio   = 1
)

// OpenUser opens the program on the first of the ports (substrate ifindexes) that has one,
// with its maps by name; nil if none has.
func OpenUser(ifindexes []int) (*UserProgram, error) {
	for _, ifindex := range ifindexes {
		id, err := userFilterProg(ifindex)
		if err != nil {
			return nil, err
		}
		if id == 0 {
			continue
		}
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dataplane: opening program %d: %w", id, err)
		}
		u, err := openUserMaps(p)
		if err != nil {
			p.Close()
			return nil, err
		}
		return u, nil
	}
	return nil, nil
}

func openUserMaps(p *ebpf.Program) (*UserProgram, error) {
	info, err := p.Info()
	if err != nil {
		return nil, fmt.Errorf("dataplane: reading program: %w", err)
	}
	u := &UserProgram{Prog: p, Name: info.Name, maps: map[string]*ebpf.Map{}}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("dataplane: opening map %d: %w", id, err)
		}
		mi, err := m.Info()
		if err != nil {
			m.Close()
			u.Close()
			return nil, fmt.Errorf("dataplane: reading map %d: %w", id, err)
		}
		u.maps[mi.Name] = m
	}
	return u, nil
}

// userFilterProg returns the id of the program in the node-program filter on the port's tc
// egress; 0 if there is none.
func userFilterProg(ifindex int) (int, error) {
	filters, err := listFilters(&netlink.Handle{}, ifindex, netlink.HANDLE_MIN_EGRESS)
	if err != nil {
		return 0, fmt.Errorf("dataplane: filters of port %d: %w", ifindex, err)
	}
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == userFilterName {
			return bf.Id, nil
		}
	}
	return 0, nil
}

// sameCode tells whether two programs have the same instructions (their tags).
func sameCode(a, b *ebpf.Program) bool {
	ai, err1 := a.Info()
	bi, err2 := b.Info()
	return err1 == nil && err2 == nil && ai.Tag == bi.Tag
}

// InstallUser makes program u run on a node's ports (port number -> substrate ifindex). If
// the ports run a program with u's instructions already, that one stays, with its tables'
// contents, and goes onto the ports that lack it; otherwise u replaces it on every port (its
// tables start empty). The port maps are filled before the program is attached.
func InstallUser(u *UserProgram, ports map[int]int) error {
	ifindexes := make([]int, 0, len(ports))
	for _, ifindex := range ports {
		ifindexes = append(ifindexes, ifindex)
	}
	cur, err := OpenUser(ifindexes)
	if err != nil {
		return err
	}
	target := u
	if cur != nil {
		defer cur.Close()
		if sameCode(cur.Prog, u.Prog) {
			target = cur
		}
	}
	if err := target.setPorts(ports); err != nil {
		return err
	}
	pinfo, err := target.Prog.Info()
	if err != nil {
		return fmt.Errorf("dataplane: reading program: %w", err)
	}
	pid, _ := pinfo.ID()
	for _, ifindex := range ifindexes {
		if id, err := userFilterProg(ifindex); err != nil {
			return err
		} else if id == int(pid) {
			continue
		}
		if err := attachUser(ifindex, target.Prog); err != nil {
			return err
		}
	}
	return nil
}

// setPorts fills the port maps of trellis.h, those the program uses (the compiler leaves out
// a map the program never reads).
func (u *UserProgram) setPorts(ports map[int]int) error {
	if pm := u.maps[userPortsMap]; pm != nil {
		for port, ifindex := range ports {
			if err := pm.Put(uint32(port), uint32(ifindex)); err != nil {
				return fmt.Errorf("dataplane: port %d: %w", port, err)
			}
		}
	}
	om := u.maps[userPortOfMap]
	if om == nil {
		return nil
	}
	mine := map[uint32]bool{}
	for _, ifindex := range ports {
		mine[uint32(ifindex)] = true
	}
	var k, v uint32
	var stale []uint32 // ports made anew (a link's MTU changed) had another ifindex
	for it := om.Iterate(); it.Next(&k, &v); {
		if !mine[k] {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := om.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dataplane: port map: %w", err)
		}
	}
	for port, ifindex := range ports {
		if err := om.Put(uint32(ifindex), uint32(port)); err != nil {
			return fmt.Errorf("dataplane: port %d: %w", port, err)
		}
	}
	return nil
}

func attachUser(ifindex int, prog *ebpf.Program) error {
	if err := ensureClsact(ifindex); err != nil {
		return fmt.Errorf("dataplane: node program on port %d: %w", ifindex, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_EGRESS, Handle: userFilterHandle,
			Priority: userFilterPrio, Protocol: unix.ETH_P_ALL},
		Fd: prog.FD(), Name: userFilterName, DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return fmt.Errorf("dataplane: node program on port %d: %w", ifindex, err)
	}
	return nil
}
