package enginehelper

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"

	"github.com/trellisnet/trellis/internal/plan"
)

// HostedConfig returns the configuration of the holder of h's engines on this machine (plan
// p's): one FE per engine held here, whose copies of the node's interfaces are VXLAN devices
// towards the node's machine, each with a listener for the node's helper's mirror.
func HostedConfig(stateDir string, p *plan.Plan, h *plan.Hosted) Config {
	c := Config{StateDir: stateDir, NetID: p.NetID, Node: h.Node, Sysctl: h.Sysctl, Network: p.Network,
		Local: p.Local.String(), Home: h.HomeAddr.String(), Here: h.Here}
	for _, e := range h.Engines {
		e.Line = 0
		c.Engines = append(c.Engines, e)
	}
	for _, in := range h.Ifaces {
		c.Ifaces = append(c.Ifaces, Iface{Name: in.Name, MAC: in.MAC, MTU: in.MTU})
	}
	return c
}

// hold makes the FEs c holds and serves the node's helper's mirror into them until the
// process is killed (down, or a new configuration). It returns only an error.
func hold(c Config, ready *os.File) error {
	home, err := netip.ParseAddr(c.Home)
	if err != nil {
		return fmt.Errorf("%w: home %q", ErrConfig, c.Home)
	}
	for _, i := range c.Here {
		if i < 0 || i >= len(c.Engines) {
			return fmt.Errorf("%w: engine %d of %d", ErrConfig, i, len(c.Engines))
		}
		f, err := makeFE(c, i)
		if err != nil {
			return err
		}
		f.ops = localOps{f.nl, f.rt}
		ln, err := listenFrom(context.Background(), net.JoinHostPort(c.Local, strconv.Itoa(plan.EngineMirrorPort(c.Network, c.Node, i))), home)
		if err != nil {
			return fmt.Errorf("FE %d: mirror listener: %w", i, err)
		}
		go serveHeld(ln, home, wireHello{Engine: i, Links: f.links}, f.ops)
	}
	fmt.Fprint(ready, "ok\n")
	ready.Close()
	select {} // killed by down or by a new configuration; the FEs go with the process
}

// serveHeld takes the connections of the node's helper (from home only: the listener's socket
// filter drops the rest, and this check stays for a listener without one; and from a port only
// home's root can bind, fromRoot), one at a time: a new
// one replaces the one before (a helper that was replaced, or a link that broke silently).
func serveHeld(ln net.Listener, home netip.Addr, hello wireHello, ops feOps) {
	var mu sync.Mutex // one change at a time into the FE
	var last net.Conn
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		from, _ := netip.ParseAddrPort(conn.RemoteAddr().String())
		if !fromRoot(from, home) {
			conn.Close()
			continue
		}
		if last != nil {
			last.Close()
		}
		last = conn
		go serveConn(conn, hello, lockedOps{ops, &mu})
	}
}
