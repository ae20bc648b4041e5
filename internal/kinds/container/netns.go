package container

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nodeNS is an open handle on a node's network namespace.
type nodeNS struct {
	ns netns.NsHandle
	nl *netlink.Handle
}

func openNS(pid int) (*nodeNS, error) {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil, fmt.Errorf("node network namespace: %w", err)
	}
	nl, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE) // one socket, not one per family
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in node: %w", err)
	}
	return &nodeNS{ns: ns, nl: nl}, nil
}

func (n *nodeNS) Close() {
	n.nl.Close()
	n.ns.Close()
}

// sysctl writes net.* sysctls in the node's network namespace, through a proc file system of
// their own (netnsutil.SysctlPrivate), not the node's /proc, which its root can mount over.
func (n *nodeNS) sysctl(values map[string]string) error {
	return netnsutil.SysctlPrivate(n.ns, values)
}
