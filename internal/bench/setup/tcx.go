package setup

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tcxSetup builds the setup shortbridge-tcx: the shortbridge setup, whose port programs are
// then moved from cls_bpf filters under clsact qdiscs (the connectors' default path) to the
// ports' tcx ingress (TRELLIS_PORT_HOOK=tcx), to measure what the tc classifier around the
// program costs against tcx in the same run.
func tcxSetup(h *Harness, nets int) (*Rig, error) {
	g := h.NewRig("shortbridge-tcx")
	g.Nets = nets
	for i := 0; i < nets; i++ {
		if err := h.addTrellisNet(g, fmt.Sprintf("bench-sbtcx-%d", i), "connector: "+spec.Shortbridge, false, toTCX); err != nil {
			return g, err
		}
	}
	return g, nil
}

// toTCX moves the shortbridge of every port of b to its tcx ingress, each aimed at the other
// port of its link, through bpf_redirect_peer (the bench's links have no shaper).
func toTCX(b *BenchNet) error {
	for _, l := range b.plan.Links {
		if len(l.Ports) != 2 {
			return fmt.Errorf("link %s has %d ports, not 2", l.Name, len(l.Ports))
		}
		var idx [2]int
		for i, p := range l.Ports {
			lk, err := netlink.LinkByName(p.Name)
			if err != nil {
				return fmt.Errorf("port %s: %w", p.Name, err)
			}
			idx[i] = lk.Attrs().Index
		}
		for i := range idx {
			if err := dataplane.AttachShortbridgeOn(dataplane.HookTCX, idx[i], idx[1-i], true); err != nil {
				return err
			}
		}
	}
	return nil
}

// xdpSetup builds the prototype setup shortbridge-xdp (issue 16, item 6): the shortbridge
// setup with XDP on the ports (dataplane.AttachShortbridgeXDP: redirect through a device map to
// the other port) and a passing XDP program on the nodes' interfaces, which a veth needs to
// take redirected XDP frames. XDP runs in the port's NAPI, on the CPU that sent the frame,
// before RPS: so the source link's first port polls in a NAPI thread pinned to the forwarding
// CPU, and what it redirects is polled there too. Its time is not NET_RX softirq time: the cpu
// part's figure misses it, its busy column does not.
func xdpSetup(h *Harness, nets int) (*Rig, error) {
	g := h.NewRig("shortbridge-xdp")
	g.Nets = nets
	for i := 0; i < nets; i++ {
		toXDP := func(b *BenchNet) error {
			for _, l := range b.plan.Links {
				if len(l.Ports) != 2 {
					return fmt.Errorf("link %s has %d ports, not 2", l.Name, len(l.Ports))
				}
				var idx [2]int
				for i, p := range l.Ports {
					lk, err := netlink.LinkByName(p.Name)
					if err != nil {
						return fmt.Errorf("port %s: %w", p.Name, err)
					}
					idx[i] = lk.Attrs().Index
					ns := b.NS[p.Node]
					if err := netnsutil.Do(ns, func() error { return dataplane.AttachXDPPass(p.Ifname) }); err != nil {
						return err
					}
				}
				for i := range idx {
					if err := dataplane.AttachShortbridgeXDP(idx[i], idx[1-i]); err != nil {
						return err
					}
				}
			}
			return h.threadedNAPI(b.plan.Links[0].Ports[0].Name)
		}
		if err := h.addTrellisNet(g, fmt.Sprintf("bench-sbxdp-%d", i), "connector: "+spec.Shortbridge, false, toXDP); err != nil {
			return g, err
		}
	}
	return g, nil
}

// threadedNAPI makes the root namespace's device dev poll in a NAPI thread of its own, pinned to
// the forwarding CPU.
func (h *Harness) threadedNAPI(dev string) error {
	if h.FwdCPU < 0 {
		return nil
	}
	if err := os.WriteFile("/sys/class/net/"+dev+"/threaded", []byte("1"), 0); err != nil {
		return fmt.Errorf("threaded NAPI on %s: %w", dev, err)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(h.FwdCPU)
	found := false
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + d.Name() + "/comm")
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "napi/"+dev+"-") {
			continue
		}
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return fmt.Errorf("pinning %s's NAPI thread: %w", dev, err)
		}
		found = true
	}
	if !found {
		return fmt.Errorf("no NAPI thread of %s", dev)
	}
	return nil
}
