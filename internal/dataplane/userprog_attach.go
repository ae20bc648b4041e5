package dataplane

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The filter that holds a node's own program on each of its ports' tc egress: alone there (a
// node with a program has no engines, whose classifier uses the same place), with a fixed
// handle so that attaching again replaces it in place. Its name is userFilterName, ":" and
// the program's Digest.
const (
	userFilterName   = "trellis_dp"
	userFilterHandle = 0x9e
	userFilterPrio   = 1
)

// OpenUser opens the program on the first of the ports (substrate ifindexes) that has one,
// with its maps by name; nil if none has.
func OpenUser(ifindexes []int) (*UserProgram, error) {
	for _, ifindex := range ifindexes {
		id, digest, err := userFilterProg(ifindex)
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
		u.Digest = digest
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

// userFilterProg returns the id and digest of the program in the node-program filter on the
// port's tc egress; 0 if there is none.
func userFilterProg(ifindex int) (int, string, error) {
	filters, err := listFilters(&netlink.Handle{}, ifindex, netlink.HANDLE_MIN_EGRESS)
	if err != nil {
		return 0, "", fmt.Errorf("dataplane: filters of port %d: %w", ifindex, err)
	}
	for _, f := range filters {
		bf, ok := f.(*netlink.BpfFilter)
		if name, digest, _ := strings.Cut(bf.Name, ":"); ok && name == userFilterName {
			return bf.Id, digest, nil
		}
	}
	return 0, "", nil
}

// InstallUser makes program u run on a node's ports (port number -> substrate ifindex),
// where cur (OpenUser; nil if none) runs now. If cur was loaded from u's object, it stays,
// with its tables, and goes onto the ports that lack it; otherwise u replaces it on every
// port, each port's filter swapped in place (the port stays). The port maps are filled
// before the program is attached.
func InstallUser(u, cur *UserProgram, ports map[int]int) error {
	target := u
	if cur != nil && cur.Digest == u.Digest {
		target = cur
	}
	if err := target.setPorts(ports); err != nil {
		return err
	}
	pinfo, err := target.Prog.Info()
	if err != nil {
		return fmt.Errorf("dataplane: reading program: %w", err)
	}
	pid, _ := pinfo.ID()
	for _, ifindex := range ports {
		if id, _, err := userFilterProg(ifindex); err != nil {
			return err
		} else if id == int(pid) {
			continue
		}
		if err := attachUser(ifindex, target); err != nil {
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

func attachUser(ifindex int, u *UserProgram) error {
	if err := ensureClsact(ifindex); err != nil {
		return fmt.Errorf("dataplane: node program on port %d: %w", ifindex, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_EGRESS, Handle: userFilterHandle,
			Priority: userFilterPrio, Protocol: unix.ETH_P_ALL},
		Fd: u.Prog.FD(), Name: userFilterName + ":" + u.Digest, DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return fmt.Errorf("dataplane: node program on port %d: %w", ifindex, err)
	}
	return nil
}
