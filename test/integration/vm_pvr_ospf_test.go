//go:build integration

package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// pvrOSPFTopo is the mirror test's chain h1 -- r -- r2 -- h2 with r, a VM node with two
// engine VMs, and r2, a container, running OSPF: r learns h2's subnet from r2, and r2 h1's
// from r. RDAEMON is r's routing daemon (its files and exec).
const pvrOSPFTopo = `name: pvro-it
nodes:
  h1:
    addresses:
      eth1: [10.96.1.1/24]
    exec: ["ip route add default via 10.96.1.2"]
  r:
    kind: vm
    engines: 2
    sysctl: {net.ipv4.ip_forward: "1"}
    addresses:
      lo: [10.96.255.1/32]
      eth1: [10.96.1.2/24]
      eth2: [10.96.2.2/24]
RDAEMON
  r2:
    sysctl: {net.ipv4.ip_forward: "1"}
    addresses:
      lo: [10.96.255.2/32]
      eth1: [10.96.2.3/24]
      eth2: [10.96.3.3/24]
` + pvrBirdNode + `
  h2:
    addresses:
      eth1: [10.96.3.1/24]
    exec:
      - ip route add default via 10.96.3.3
      - python3 -c 'import socket; s = socket.socket(2, 2); s.bind(("", 9000)); [s.recv(2048) for _ in iter(int, 1)]' >/dev/null 2>&1 &
links:
  - endpoints: [h1:eth1, r:eth1]
  - endpoints: [r:eth2, r2:eth1]
  - endpoints: [r2:eth2, h2:eth1]
`

// pvrBirdNode runs BIRD with OSPF on both link interfaces (the one without a neighbour
// announced as a stub) and the loopback as a stub.
const pvrBirdNode = `    files:
      - path: /etc/bird/bird.conf
        content: |
          protocol device { scan time 10; }
          protocol kernel { ipv4 { import none; export all; }; }
          protocol ospf v2 {
            ipv4 { import all; export none; };
            area 0 {
              interface "eth1", "eth2" { type ptp; hello 1; dead 4; };
              interface "lo" { stub yes; };
            };
          }
    exec: ["mkdir -p /run/bird", "bird -c /etc/bird/bird.conf -s /run/bird/bird.ctl"]`

// pvrFRRNode runs stock FRR as examples/vm-mixed does: ospfd on eth2 towards r2, eth1 and the
// loopback passive. ROOT is the module's root. zebra installs its routes through nexthop
// objects.
const pvrFRRNode = `    files:
      - {path: /etc/frr/daemons, source: ROOT/examples/frr-ospf/daemons, owner: "frr:frr", mode: "0640"}
      - {path: /var/log/frr/frr.log, content: "", owner: "frr:frr", mode: "0640"}
      - path: /etc/frr/frr.conf
        owner: "frr:frr"
        mode: "0640"
        content: |
          frr defaults traditional
          hostname r
          log file /var/log/frr/frr.log
          service integrated-vtysh-config
          interface lo
           ip ospf area 0
           ip ospf passive
          interface eth1
           ip ospf area 0
           ip ospf passive
          interface eth2
           ip ospf area 0
           ip ospf network point-to-point
           ip ospf hello-interval 1
           ip ospf dead-interval 4
          router ospf
           ospf router-id 10.96.255.1
    exec: [/usr/lib/frr/frrinit.sh start]`

// TestVMEnginesOSPF checks a VM node with engines running a routing daemon, BIRD and then
// FRR (whose routes go through nexthop objects): the route to h2's subnet it learns by OSPF
// from the container router r2 reaches its engine VMs, which forward h1's traffic on it.
func TestVMEnginesOSPF(t *testing.T) {
	needQEMU(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, node, proto string }{
		{"bird", pvrBirdNode, "proto bird"},
		{"frr", strings.ReplaceAll(pvrFRRNode, "ROOT", filepath.ToSlash(root)), "proto ospf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "frr" {
				testkit.RequireTool(t, "/usr/lib/frr/zebra", "scripts/setup.sh installs frr")
			}
			e := start(t)
			file := writeTopo(t, strings.Replace(pvrOSPFTopo, "RDAEMON", c.node, 1))
			mustTrellis(t, e.state, "up", file)
			pvrOSPFForwards(t, e.state, c.proto)
			mustTrellis(t, e.state, "down", "pvro-it")
			e.assertClean()
		})
	}
}

// pvrOSPFForwards waits until h1 reaches h2 through r, and checks r's route to h2's subnet is
// its daemon's (proto) and that h1's frames to h2 cross r's engine VMs.
func pvrOSPFForwards(t *testing.T, state, proto string) {
	t.Helper()
	t0 := time.Now()
	if !eventually(60*time.Second, func() bool { return tryPing(t, state, "pvro-it", "h1", "10.96.3.1") == nil }) {
		out, _, _ := execIn(t, state, "pvro-it", "r", "ip", "route")
		info, _ := engines(t, state, "pvro-it", "r")
		t.Fatalf("60 s after up, h1 does not reach h2; r's routes:\n%s\nmirror: %+v", out, info.Mirror)
	}
	out := mustExec(t, state, "pvro-it", "r", "ip", "route", "show", "10.96.3.0/24")
	if !strings.Contains(out, proto) {
		t.Fatalf("r's route to h2's subnet is not its daemon's (%s): %q", proto, out)
	}
	t.Logf("h1 reached h2 %v after up; r's route: %s", time.Since(t0).Round(time.Second), strings.TrimSpace(out))
	before := feRx(t, state, "pvro-it", "r")
	sendUDP(t, state, "pvro-it", "h1", "10.96.3.1", 42000, 30)
	if d := deltas(t, state, "pvro-it", "r", before, 30); d[0]+d[1] < 30 {
		t.Errorf("30 UDP frames from h1 to h2 on the OSPF route: engine VMs received %v; want all through them", d)
	}
}
