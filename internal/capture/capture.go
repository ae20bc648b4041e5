// Package capture records a virtual link's frames from the substrate side, in both
// directions, as pcapng: AF_PACKET sockets on the link's ports in the root namespace, nothing
// inside the nodes; on a direct link (no port: one veth pair between the nodes), sockets that
// trellis opens in the nodes' network namespaces on their interfaces, which the nodes'
// software does not see. Each frame is recorded once, on an interface named NODE:IF after the node
// interface that sent it (or, for one endpoint, received it), with its direction.
package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netns"
	"golang.org/x/net/bpf"
)

// Snaplen is the most of a frame recorded (veth frames may be GSO super-frames up to 64 KiB).
const Snaplen = 262144

// Tap is one port to read: the frames its node interface sent (what enters the port), and
// with Received also those it received (what leaves the port), recorded on pcapng
// interface Iface.
type Tap struct {
	Port     string // the port device in the root namespace, or with PID the node's interface
	PID      int    // 0, or the node process in whose network namespace Port is (a direct link)
	Iface    int    // index of the pcapng interface
	Sent     uint32 // direction of the frames entering the port, on that interface
	Received bool   // also record the frames leaving the port (Inbound)
}

// Plan is what capturing a link reads: the pcapng interfaces (named NODE:IF) and the taps.
type Plan struct {
	Interfaces []string
	Taps       []Tap
}

// ForLink plans the capture of link linkName of network, or, with endpoint (NODE:IF), of the
// frames that endpoint sends and receives.
//
// Without endpoint every port's incoming frames are read, once each, on an interface named
// after the endpoint that sent them. With endpoint, on one interface named after it: what it
// sends (Outbound), and what it receives (Inbound), which a point-to-point connector hands
// from the other port straight to the node, so it is read where it enters the other port.
func ForLink(st *state.Store, network, linkName, endpoint string) (*Plan, error) {
	rec, err := st.Load(network)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("%w %s in %s", substrate.ErrNoNetwork, network, st.Dir)
	}
	l := rec.Plan.Link(linkName)
	if l == nil {
		return nil, fmt.Errorf("network %s: %w %q on this machine (see `trellis link %s`)", network, substrate.ErrNoLink, linkName, network)
	}
	if substrate.Wired(l) {
		return forDirect(l, rec.Nodes, network, endpoint)
	}
	if endpoint == "" {
		p := &Plan{}
		for i, port := range l.Ports {
			p.Interfaces = append(p.Interfaces, port.String())
			p.Taps = append(p.Taps, Tap{Port: port.Name, Iface: i, Sent: Outbound})
		}
		return p, nil
	}
	return forEndpoint(l, network, endpoint)
}

func forEndpoint(l *plan.Link, network, endpoint string) (*Plan, error) {
	p := &Plan{Interfaces: []string{endpoint}}
	var others []string
	for _, port := range l.Ports {
		if port.String() == endpoint {
			p.Taps = append(p.Taps, Tap{Port: port.Name, Sent: Outbound})
		} else {
			others = append(others, port.Name)
		}
	}
	if len(p.Taps) == 0 {
		return nil, fmt.Errorf("network %s: link %s: %w: it has no endpoint %s on this machine", network, l.Name, substrate.ErrNoLink, endpoint)
	}
	k, err := kinds.LinkKind(l.Connector)
	if err != nil {
		return nil, err
	}
	if !k.Direct() || len(l.Tunnels) > 0 {
		p.Taps[0].Received = true // the connector sends the endpoint's frames out of its port
		return p, nil
	}
	for _, name := range others {
		p.Taps = append(p.Taps, Tap{Port: name, Sent: Inbound})
	}
	return p, nil
}

// forDirect plans the capture of a direct link (no port) on its nodes' interfaces, from
// inside their namespaces (pids: the nodes' processes): each frame once, on the interface of
// the endpoint that sent it, or with endpoint on that endpoint's alone, both ways.
func forDirect(l *plan.Link, pids map[string]int, network, endpoint string) (*Plan, error) {
	p := &Plan{}
	for _, port := range l.Ports {
		if endpoint != "" && port.String() != endpoint {
			continue
		}
		if pids[port.Node] == 0 {
			return nil, fmt.Errorf("network %s: link %s: node %s does not run", network, l.Name, port.Node)
		}
		p.Taps = append(p.Taps, Tap{Port: port.Ifname, PID: pids[port.Node], Iface: len(p.Interfaces), Sent: Outbound, Received: endpoint != ""})
		p.Interfaces = append(p.Interfaces, port.String())
	}
	if len(p.Taps) == 0 {
		return nil, fmt.Errorf("network %s: link %s: %w: it has no endpoint %s on this machine", network, l.Name, substrate.ErrNoLink, endpoint)
	}
	return p, nil
}

// Options of a capture.
type Options struct {
	Filter []bpf.RawInstruction // classic BPF run on each frame (nil: every frame)
	Count  int                  // stop after this many frames (0: until ctx ends)
	// Pcap writes the classic pcap format instead of pcapng: no interface names, no directions.
	Pcap bool
}

// packetWriter writes frames in one of the formats.
type packetWriter interface {
	writePacket(iface int, ts time.Time, data []byte, orig int, dir uint32) error
}

// newWriter writes the format's header (for pcapng, the interfaces named p.Interfaces).
func newWriter(w io.Writer, p *Plan, opts Options) (packetWriter, error) {
	if opts.Pcap {
		return newPcapWriter(w, Snaplen)
	}
	ng, err := newNgWriter(w)
	if err != nil {
		return nil, err
	}
	for _, name := range p.Interfaces {
		if err := ng.addInterface(name, Snaplen); err != nil {
			return nil, err
		}
	}
	return ng, nil
}

// Run records the planned taps into w as pcapng (or pcap) until ctx ends or opts.Count frames were
// written, and returns how many were.
func Run(ctx context.Context, p *Plan, w io.Writer, opts Options) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var socks []*socket
	defer func() {
		for _, s := range socks {
			s.close()
		}
	}()
	for _, t := range p.Taps {
		s, err := openTap(t, opts.Filter)
		if err != nil {
			return 0, err
		}
		socks = append(socks, s)
	}
	pw, err := newWriter(w, p, opts)
	if err != nil {
		return 0, err
	}
	frames := make(chan frame, 1024)
	errc := make(chan error, len(socks))
	for i, s := range socks {
		go func() { errc <- s.read(ctx, p.Taps[i], frames) }()
	}
	return write(ctx, pw, frames, errc, opts.Count)
}

// openTap opens the socket of tap t: on a port in the root namespace or in its network's port
// namespace (substrate.PortNSEnv), or on a node's interface from inside the node's network
// namespace (the socket stays bound to where it was opened).
func openTap(t Tap, filter []bpf.RawInstruction) (*socket, error) {
	if t.PID == 0 {
		pns, ok, err := substrate.OpenPortNS(plan.DeviceNetID(t.Port))
		if err != nil {
			return nil, fmt.Errorf("capture: port %s: %w", t.Port, err)
		}
		if !ok {
			return openPort(t, filter)
		}
		defer pns.Close()
		var s *socket
		err = netnsutil.Do(pns, func() (err error) {
			s, err = openPort(t, filter)
			return err
		})
		return s, err
	}
	ns, err := netns.GetFromPid(t.PID)
	if err != nil {
		return nil, fmt.Errorf("capture: interface %s: the node's network namespace: %w", t.Port, err)
	}
	defer ns.Close()
	var s *socket
	err = netnsutil.Do(ns, func() error {
		dev, err := net.InterfaceByName(t.Port)
		if err != nil {
			return err
		}
		s, err = openSocket(dev.Index, filter)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("capture: interface %s in its node: %w", t.Port, err)
	}
	s.inside = true
	return s, nil
}

// openPort opens the socket of tap t on its port, in the calling thread's namespace.
func openPort(t Tap, filter []bpf.RawInstruction) (*socket, error) {
	dev, err := netdev.ByName(t.Port)
	if err != nil || dev == nil {
		return nil, errors.Join(fmt.Errorf("capture: port %s is not there (is the node running?)", t.Port), err)
	}
	s, err := openSocket(dev.Attrs().Index, filter)
	if err != nil {
		return nil, fmt.Errorf("capture: port %s: %w", t.Port, err)
	}
	return s, nil
}

// write writes frames as they come, until ctx ends, count frames were written or a socket
// failed.
func write(ctx context.Context, pw packetWriter, frames <-chan frame, errc <-chan error, count int) (int, error) {
	n := 0
	for count == 0 || n < count {
		select {
		case <-ctx.Done():
			return n, nil
		case err := <-errc:
			if err != nil {
				return n, err
			}
		case f := <-frames:
			if err := pw.writePacket(f.iface, f.ts, f.data, f.orig, f.dir); err != nil {
				return n, fmt.Errorf("capture: writing: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// frame is one frame read from a tap.
type frame struct {
	iface int
	ts    time.Time
	data  []byte
	orig  int
	dir   uint32
}
