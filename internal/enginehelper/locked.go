package enginehelper

import (
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
)

// lockedOps applies one change at a time to an FE served to more than one connection.
type lockedOps struct {
	ops feOps
	mu  *sync.Mutex
}

func (l lockedOps) AddrReplace(link netlink.Link, a *netlink.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops.AddrReplace(link, a)
}

func (l lockedOps) AddrDel(link netlink.Link, a *netlink.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops.AddrDel(link, a)
}

func (l lockedOps) NeighSet(n *netlink.Neigh) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops.NeighSet(n)
}

func (l lockedOps) NeighDel(n *netlink.Neigh) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops.NeighDel(n)
}

func (l lockedOps) send(changes []rtChange) (map[int]syscall.Errno, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops.send(changes)
}

func (l lockedOps) dump() ([]*rtMsg, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops.dump()
}
