package setup

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	ebpfexamples "github.com/trellisnet/trellis/examples/ebpf"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// ebpfSetup builds the setup ebpf-l3: the shortbridge setup whose node under test forwards
// with the program of examples/ebpf/l3 (dataplane: {program: l3.c}, docs/ebpf-nodes.md), its
// kernel forwarding nothing, and its routes table filled as `trellis table` would.
func ebpfSetup(h *Harness, nets int) (*Rig, error) {
	g := h.NewRig("ebpf-l3")
	g.Nets = nets
	dir, err := os.MkdirTemp("", "trellis-bench-ebpf-")
	if err != nil {
		return g, err
	}
	g.onClose(func() error { return os.RemoveAll(dir) })
	prog := filepath.Join(dir, "l3.c")
	if err := os.WriteFile(prog, ebpfexamples.L3, 0o644); err != nil {
		return g, err
	}
	for i := 0; i < nets; i++ {
		name := fmt.Sprintf("bench-ebpf-l3-%d", i)
		b, err := h.upBenchFile(g, name, ebpfTopology(name, prog))
		if err != nil {
			return g, err
		}
		if err := fillL3Routes(b); err != nil {
			return g, fmt.Errorf("network %s: %w", name, err)
		}
		if err := h.steer(h.rootNS, b.plan.Links[0].Ports[0].Name); err != nil {
			return g, err
		}
		if err := g.finish(b.NS["src"], "eth1", b.NS["nut"], "eth1", b.NS["sink"], "eth1", SinkIP); err != nil {
			return g, err
		}
	}
	return g, nil
}

// ebpfTopology is the bench topology whose node under test runs program prog and does not
// forward in its kernel.
func ebpfTopology(name, prog string) string {
	t := strings.Replace(benchFile(name, "connector: "+spec.Shortbridge),
		"  nut:\n", "  nut:\n    dataplane: {program: "+prog+"}\n", 1)
	return strings.Replace(t, "disable_ipv6: 1}\n  sink:", "disable_ipv6: 1, net.ipv4.ip_forward: 0}\n  sink:", 1)
}

// fillL3Routes gives the node under test's program its two routes: 10.1.0.0/24 out of port 1
// to the source, 10.2.0.0/24 out of port 2 to the sink (l3.c's table layouts).
func fillL3Routes(b *BenchNet) error {
	var ifindexes []int
	for _, l := range b.plan.Links {
		for _, p := range l.Ports {
			lk, err := netlink.LinkByName(p.Name)
			if err != nil {
				return fmt.Errorf("port %s: %w", p.Name, err)
			}
			ifindexes = append(ifindexes, lk.Attrs().Index)
		}
	}
	u, err := dataplane.OpenUser(ifindexes)
	if err != nil {
		return err
	}
	if u == nil {
		return fmt.Errorf("no program on the node under test's ports")
	}
	defer u.Close()
	for _, r := range []struct {
		node   string
		prefix net.IP
		port   uint16
	}{{"src", net.IPv4(10, 1, 0, 0), 1}, {"sink", net.IPv4(10, 2, 0, 0), 2}} {
		nh, err := netlink.NewHandleAt(b.NS[r.node])
		if err != nil {
			return err
		}
		lk, err := nh.LinkByName("eth1")
		nh.Close()
		if err != nil {
			return fmt.Errorf("%s's eth1: %w", r.node, err)
		}
		key := binary.LittleEndian.AppendUint32(nil, 24)
		key = append(key, r.prefix.To4()...)
		value := binary.LittleEndian.AppendUint16(append([]byte(nil), lk.Attrs().HardwareAddr...), r.port)
		if err := u.Set("routes", key, value); err != nil {
			return err
		}
	}
	return nil
}
