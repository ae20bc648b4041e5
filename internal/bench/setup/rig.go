package setup

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/vishvananda/netns"
)

// source is where a virtual network's traffic starts.
type source struct {
	ns     netns.NsHandle
	ifname string
	addrs  measure.FlowAddrs
	link   *nsLink
}

// Rig is a built setup: its sources, its generator and sink (measure.Traffic: Trial measures
// through it), and how to take it down.
type Rig struct {
	measure.Traffic
	Name string
	Nets int // parallel virtual networks
	// Tunnel: the source and sink are on another simulated machine than the node under test;
	// Split steers that machine's work away from the forwarding CPU (true), or back (false).
	Tunnel bool
	Split  func(split bool) error
	// Relay returns the pid of the user-space relay (setup userspace), 0 if it is gone; nil in
	// the other setups.
	Relay   func() int
	sources []*source
	genCPU  int
	// minFlows: the setup's sources send at least this many flows (vm-pvr, whose dispatch
	// spreads flows, not frames).
	minFlows int
	closers  []func() error
	after    []chan struct{} // closed when processes of the setup have been reaped
}

// NewRig returns an empty rig that networks are added to (Harness.AddTrellisNet).
func (h *Harness) NewRig(name string) *Rig { return &Rig{Name: name, genCPU: h.GenCPU} }

// onClose registers f to run at Close, in reverse order of registration.
func (g *Rig) onClose(f func() error) { g.closers = append(g.closers, f) }

// Close tears the setup down and reports every failure.
func (g *Rig) Close() error {
	var errs []error
	if g.Gen != nil {
		g.Gen.Close()
	}
	for _, s := range g.sources {
		if s.link != nil {
			s.link.Close()
		}
	}
	for i := len(g.closers) - 1; i >= 0; i-- {
		if err := g.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if g.Sink != nil {
		g.Sink.Close()
	}
	for _, c := range g.after {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("a process of the setup did not end"))
		}
	}
	return errors.Join(errs...)
}

// CloseAll closes every rig and reports every failure.
func CloseAll(rigs []*Rig) error {
	var errs []error
	for _, g := range rigs {
		errs = append(errs, g.Close())
	}
	return errors.Join(errs...)
}

// SetFrames (re)makes the generator's frames: size bytes, spread over flows UDP flows per
// virtual network. The transmit sockets are opened on first use, and again for a rig that has
// gained networks since.
func (g *Rig) SetFrames(size, flows int) error {
	if g.Gen != nil && len(g.Gen.Ports) != len(g.sources) {
		g.Gen.Close()
		g.Gen = nil
	}
	if g.Gen == nil {
		g.Gen = &measure.Generator{CPU: g.genCPU}
		for _, s := range g.sources {
			p, err := measure.OpenTxPort(s.ns, s.ifname)
			if err != nil {
				return err
			}
			g.Gen.Ports = append(g.Gen.Ports, p)
		}
	}
	for i, s := range g.sources {
		frames, err := measure.UDPFrames(s.addrs, size, max(flows, g.minFlows))
		if err != nil {
			return err
		}
		g.Gen.Ports[i].SetFrames(frames)
	}
	return nil
}

// finish wires the generator and the sink of a network: the node under test (or the sink, for
// direct) nut:nutIf receives from src:srcIf, the node knows the sink's MAC, and the sink drops
// and counts. dst is the destination address of the frames.
func (g *Rig) finish(src netns.NsHandle, srcIf string, nut netns.NsHandle, nutIf string, sink netns.NsHandle, sinkIf string, dst net.IP) error {
	nl, err := openLink(nut, nutIf)
	if err != nil {
		return err
	}
	defer nl.Close()
	nutMAC, err := nl.mac()
	if err != nil {
		return err
	}
	if nut != sink { // the node under test needs the sink's MAC: the sink answers no ARP
		kl, err := openLink(sink, sinkIf)
		if err != nil {
			return err
		}
		defer kl.Close()
		sinkMAC, err := kl.mac()
		if err != nil {
			return err
		}
		out, err := openLink(nut, "eth2")
		if err != nil {
			return err
		}
		defer out.Close()
		if err := out.neigh(SinkIP, sinkMAC); err != nil {
			return fmt.Errorf("neighbour entry for the sink: %w", err)
		}
	}
	return g.wire(src, srcIf, nutMAC, sink, sinkIf, dst)
}

// wire adds the source src:srcIf, sending to nutMAC, to the generator, and the sink
// sink:sinkIf to the sink counter.
func (g *Rig) wire(src netns.NsHandle, srcIf string, nutMAC net.HardwareAddr, sink netns.NsHandle, sinkIf string, dst net.IP) error {
	sl, err := openLink(src, srcIf)
	if err != nil {
		return err
	}
	s := &source{ns: src, ifname: srcIf, link: sl}
	g.sources = append(g.sources, s)
	srcMAC, err := sl.mac()
	if err != nil {
		return err
	}
	s.addrs = measure.FlowAddrs{SrcMAC: srcMAC, DstMAC: nutMAC, SrcIP: SrcIP, DstIP: dst, SrcPort: SrcPort, DstPort: SinkPort}
	if g.Sink == nil {
		if g.Sink, err = measure.NewSink(); err != nil {
			return err
		}
	}
	return g.Sink.Attach(sink, sinkIf)
}
