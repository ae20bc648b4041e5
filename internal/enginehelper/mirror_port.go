package enginehelper

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// The mirror's connection proves that root made it the way rsh did: it comes from a port
// below privilegedPorts of the node's machine, which only a process with CAP_NET_BIND_SERVICE
// in that machine's network namespace can bind (on a machine whose
// net.ipv4.ip_unprivileged_port_start is the default, 1024). The holder's socket filter admits
// only the node's machine's address; this tells trellis on that machine from its local users,
// who could otherwise connect too, replace the helper's connection and write routes into the
// engines.
const (
	privilegedPorts = 1024
	mirrorPortLow   = 512 // the ports the helper binds: mirrorPortLow..privilegedPorts-1
	bindTries       = 64
)

// fromRoot says whether a mirror connection from addr comes from the node's machine home and a
// port only its root can bind.
func fromRoot(addr netip.AddrPort, home netip.Addr) bool {
	return addr.Addr().Unmap() == home && addr.Port() < privilegedPorts
}

// dialPrivileged connects to the holder at addr from a port below privilegedPorts, trying
// others while the one drawn is in use.
func dialPrivileged(addr string, timeout time.Duration) (net.Conn, error) {
	var err error
	for range bindTries {
		port := mirrorPortLow + rand.IntN(privilegedPorts-mirrorPortLow)
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{Port: port}}
		var conn net.Conn
		if conn, err = d.Dial("tcp4", addr); !errors.Is(err, syscall.EADDRINUSE) {
			return conn, err
		}
	}
	return nil, err
}
