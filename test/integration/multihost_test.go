//go:build integration

package integration

// Networks spread over several machines, with simulated machines on one host (see
// machinesUp in multihost_helpers_test.go): EGRE and VXLAN tunnels, placement, MTU, the OSPF
// ring over three machines, isolation of networks that share machines, the EGRE wire format
// and its drops, down on every machine, and rate caps over tunnels.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/testkit"

	"github.com/trellisnet/trellis/internal/plan"
)

// mhTunnels are the tunnel kinds a network over several machines may use.
var mhTunnels = []string{"egre", "vxlan"}

// tunnelMTU is the default MTU of a link that crosses machines over a 1500-byte underlay:
// 1500 minus the inner Ethernet header and the outer IPv4 + GRE-with-key (egre) or
// IPv4 + UDP + VXLAN (vxlan) headers.
func tunnelMTU(tunnel string) int {
	if tunnel == "vxlan" {
		return 1450
	}
	return 1458
}

// spreadTopo is a network over three machines: nodes a and a2 on m1, b on m2, c on m3;
// point-to-point links ab (m1-m2) and bc (m2-m3, with the largest MTU that fits, bcMTU), a LAN
// with one member per machine, and a link inside m1. abRate is a rate line for ab, or "".
func spreadTopo(name, hosts string, bcMTU int, abRate string) string {
	return fmt.Sprintf(`name: %s
%snodes:
  a:
    host: m1
    addresses:
      eth1: [10.0.1.1/24, fd01::1/64]
      eth2: [10.0.9.1/24, fd09::1/64]
      eth3: [10.0.3.1/24, fd03::1/64]
  a2:
    host: m1
    addresses:
      eth1: [10.0.3.2/24, fd03::2/64]
  b:
    host: m2
    addresses:
      eth1: [10.0.1.2/24, fd01::2/64]
      eth2: [10.0.2.1/24, fd02::1/64]
      eth3: [10.0.9.2/24, fd09::2/64]
  c:
    host: m3
    addresses:
      eth1: [10.0.2.2/24, fd02::2/64]
      eth2: [10.0.9.3/24, fd09::3/64]
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
%s  - name: bc
    endpoints: [b:eth2, c:eth1]
    mtu: %d
  - name: lan
    endpoints: [a:eth2, b:eth3, c:eth2]
  - name: local
    endpoints: [a:eth3, a2:eth1]
`, name, hosts, abRate, bcMTU)
}

// spreadLinks is what each machine of spreadTopo holds: link -> the other machines it reaches.
var spreadLinks = map[int]map[string][]string{
	1: {"ab": {"m2"}, "lan": {"m2", "m3"}, "local": nil},
	2: {"ab": {"m1"}, "bc": {"m3"}, "lan": {"m1", "m3"}},
	3: {"bc": {"m2"}, "lan": {"m1", "m2"}},
}

// spreadIfaces are the node interfaces of each link of spreadTopo.
var spreadIfaces = map[string][]string{
	"ab":    {"a:eth1", "b:eth1"},
	"bc":    {"b:eth2", "c:eth1"},
	"lan":   {"a:eth2", "b:eth3", "c:eth2"},
	"local": {"a:eth3", "a2:eth1"},
}

func TestSpreadOverThreeMachines(t *testing.T) {
	for _, tunnel := range mhTunnels {
		t.Run(tunnel, func(t *testing.T) { testSpread(t, tunnel) })
	}
}

func testSpread(t *testing.T, tunnel string) {
	m := machinesUp(t, 3)
	fit := tunnelMTU(tunnel)
	name := "spread-" + tunnel
	path := writeTopo(t, spreadTopo(name, m.hostsYAML(tunnel), fit, ""))
	m.upAll(t, path, name)

	t.Run("placement and inspect", func(t *testing.T) {
		want := map[string]int{"a": 1, "a2": 1, "b": 2, "c": 3}
		if got := m.where(t, name); !mapsEqual(got, want) {
			t.Errorf("nodes are on machines %v, want %v", got, want)
		}
		keys := map[string]uint32{}
		for i := 1; i <= 3; i++ {
			info := m.inspect(t, i, name)
			if info.Host != m.name(i) || info.Tunnel != tunnel || info.Status != "up" {
				t.Errorf("m%d: inspect says host %q tunnel %q status %q, want %s, %s, up", i, info.Host, info.Tunnel, info.Status, m.name(i), tunnel)
			}
			// The machine's decapsulation program vets the VXLAN devices' packets too: both
			// tunnels show its counters.
			for _, f := range []string{"Decapsulated", "UnknownKey", "WrongSource", "Errors", "VXLANRefused"} {
				info.egre(t, f)
			}
			var names []string
			for _, l := range info.Links {
				names = append(names, l.Name)
			}
			var want []string
			for l := range spreadLinks[i] {
				want = append(want, l)
			}
			sort.Strings(names)
			sort.Strings(want)
			if !slices.Equal(names, want) {
				t.Errorf("m%d holds links %v, want %v", i, names, want)
			}
			for lname, remotes := range spreadLinks[i] {
				l := info.link(t, lname)
				wantMTU := fit
				if remotes == nil {
					wantMTU = 1500
				}
				if l.MTU != wantMTU {
					t.Errorf("m%d: link %s has MTU %d, want %d", i, lname, l.MTU, wantMTU)
				}
				for _, ifc := range spreadIfaces[lname] {
					node, ifname, _ := strings.Cut(ifc, ":")
					if !slices.Contains(info.nodes(), node) {
						continue
					}
					if mtu, _ := info.iface(t, node, ifname); mtu != wantMTU {
						t.Errorf("m%d: %s has MTU %d, want %d (link %s)", i, ifc, mtu, wantMTU, lname)
					}
				}
				var hosts []string
				devs := map[string]bool{}
				for _, tn := range l.Tunnels {
					hosts = append(hosts, tn.Host)
					devs[tn.Device] = true
					if tn.Remote != "198.18.0."+strings.TrimPrefix(tn.Host, "m") {
						t.Errorf("m%d: link %s: tunnel to %s has remote %s", i, lname, tn.Host, tn.Remote)
					}
					if k := plan.TunnelKey(nil, name, lname); tn.Key != k {
						t.Errorf("m%d: link %s: tunnel key %#08x, want %#08x", i, lname, tn.Key, k)
					}
					if old, ok := keys[lname]; ok && old != tn.Key {
						t.Errorf("link %s has keys %#08x and %#08x", lname, old, tn.Key)
					}
					keys[lname] = tn.Key
				}
				sort.Strings(hosts)
				if !slices.Equal(hosts, remotes) {
					t.Errorf("m%d: link %s has tunnels to %v, want %v", i, lname, hosts, remotes)
				}
				// EGRE: a tunnel port per other machine; VXLAN: one device reaches them all.
				wantDevs := len(remotes)
				if tunnel == "vxlan" {
					wantDevs = min(1, len(remotes))
				}
				if len(devs) != wantDevs {
					t.Errorf("m%d: link %s has tunnel devices %v, want %d", i, lname, devs, wantDevs)
				}
			}
		}
		if len(keys) != 3 || keys["ab"] == keys["bc"] || keys["ab"] == keys["lan"] || keys["bc"] == keys["lan"] {
			t.Errorf("tunnel keys %v: want three different ones", keys)
		}
		t.Logf("tunnel keys: ab %#08x, bc %#08x, lan %#08x", keys["ab"], keys["bc"], keys["lan"])
	})

	t.Run("ipv4", func(t *testing.T) {
		m.ping(t, 1, name, "a", "10.0.1.2")  // ab, m1 -> m2
		m.ping(t, 2, name, "b", "10.0.1.1")  // ab, m2 -> m1
		m.ping(t, 2, name, "b", "10.0.2.2")  // bc, m2 -> m3
		m.ping(t, 3, name, "c", "10.0.2.1")  // bc, m3 -> m2
		m.ping(t, 1, name, "a", "10.0.9.2")  // LAN, m1 -> m2
		m.ping(t, 1, name, "a", "10.0.9.3")  // LAN, m1 -> m3
		m.ping(t, 3, name, "c", "10.0.9.2")  // LAN, m3 -> m2
		m.ping(t, 1, name, "a", "10.0.3.2")  // local link on m1
		m.ping(t, 1, name, "a2", "10.0.3.1") // local link on m1
	})
	t.Run("ipv6", func(t *testing.T) {
		m.ping(t, 1, name, "a", "fd01::2")
		m.ping(t, 2, name, "b", "fd01::1")
		m.ping(t, 3, name, "c", "fd02::1")
		m.ping(t, 1, name, "a", "fd09::2")
		m.ping(t, 1, name, "a", "fd09::3")
		m.ping(t, 3, name, "c", "fd09::2")
		m.ping(t, 1, name, "a", "fd03::2")
	})
	t.Run("full-size frames", func(t *testing.T) {
		// The largest packets the MTU allows, with DF: they must cross whole.
		v4, v6 := fmt.Sprint(fit-28), fmt.Sprint(fit-48)
		m.ping(t, 1, name, "a", "10.0.1.2", "-M", "do", "-s", v4)
		m.ping(t, 1, name, "a", "fd01::2", "-M", "do", "-s", v6)
		m.ping(t, 2, name, "b", "10.0.2.2", "-M", "do", "-s", v4)
		m.ping(t, 1, name, "a", "10.0.9.3", "-M", "do", "-s", v4)
		m.ping(t, 3, name, "c", "fd09::2", "-M", "do", "-s", v6)
	})
	t.Run("arp", func(t *testing.T) {
		m.checkARP(t, name, mhEndpoint{1, "a", "eth1"}, "10.0.1.2", mhEndpoint{2, "b", "eth1"})
		m.checkARP(t, name, mhEndpoint{3, "c", "eth1"}, "10.0.2.1", mhEndpoint{2, "b", "eth2"})
		m.checkARP(t, name, mhEndpoint{1, "a", "eth2"}, "10.0.9.3", mhEndpoint{3, "c", "eth2"})
		m.checkARP(t, name, mhEndpoint{2, "b", "eth3"}, "10.0.9.1", mhEndpoint{1, "a", "eth2"})
	})
	t.Run("non-ip frame", func(t *testing.T) {
		m.checkFrameCrosses(t, name, mhEndpoint{1, "a", "eth1"}, mhEndpoint{2, "b", "eth1"})
		m.checkFrameCrosses(t, name, mhEndpoint{2, "b", "eth1"}, mhEndpoint{1, "a", "eth1"})
		m.checkFrameCrosses(t, name, mhEndpoint{3, "c", "eth1"}, mhEndpoint{2, "b", "eth2"})
		m.checkFrameCrosses(t, name, mhEndpoint{3, "c", "eth2"}, mhEndpoint{1, "a", "eth2"})
		m.checkFrameCrosses(t, name, mhEndpoint{1, "a", "eth2"}, mhEndpoint{2, "b", "eth3"})
		m.checkFrameCrosses(t, name, mhEndpoint{1, "a", "eth3"}, mhEndpoint{1, "a2", "eth1"})
	})
	t.Run("broadcast on the LAN", func(t *testing.T) {
		payload := []byte("trellis-it-bcast-" + nonce())
		rb := m.listenFrame(t, 2, name, "b", "eth3", payload, 5*time.Second)
		rc := m.listenFrame(t, 3, name, "c", "eth2", payload, 5*time.Second)
		m.sendFrame(t, 1, name, "a", "eth2", "ff:ff:ff:ff:ff:ff", payload, 3)
		if rb.result(t) == nil {
			t.Errorf("a broadcast frame from m1 a:eth2 did not reach m2 b:eth3")
		}
		if rc.result(t) == nil {
			t.Errorf("a broadcast frame from m1 a:eth2 did not reach m3 c:eth2")
		}
	})
	t.Run("rtt", func(t *testing.T) {
		const n = 100
		lmin, lavg, lmax := m.rtt(t, 1, name, "a", "10.0.3.2", n)
		xmin, xavg, xmax := m.rtt(t, 1, name, "a", "10.0.1.2", n)
		wmin, wavg, wmax := m.rtt(t, 1, name, "a", "10.0.9.3", n)
		t.Logf("ping RTT (ms, min/avg/max over %d): link on one machine %.3f/%.3f/%.3f; %s point-to-point m1-m2 %.3f/%.3f/%.3f; %s LAN m1-m3 %.3f/%.3f/%.3f",
			n, lmin, lavg, lmax, tunnel, xmin, xavg, xmax, tunnel, wmin, wavg, wmax)
	})

	t.Run("mtu too large is refused", func(t *testing.T) {
		bad := fmt.Sprintf(`name: %s-big
%snodes:
  x:
    host: m1
    addresses:
      eth1: [10.1.0.1/24]
  y:
    host: m2
links:
  - endpoints: [x:eth1, y:eth1]
    mtu: %d
`, name, m.hostsYAML(tunnel), fit+1)
		line := 1 + slices.Index(strings.Split(bad, "\n"), fmt.Sprintf("    mtu: %d", fit+1))
		badPath := writeTopo(t, bad)
		for i := 1; i <= 2; i++ {
			links := m.links(t, i)
			procs := m.nodeProcs(i)
			out, errOut, err := m.run(i, "up", badPath)
			if exitCode(err) <= 0 {
				t.Fatalf("m%d: up with an MTU of %d over %s: exit code %d (%v), want non-zero\nstdout:\n%s\nstderr:\n%s", i, fit+1, tunnel, exitCode(err), err, out, errOut)
			}
			want := fmt.Sprintf("%s:%d: links[0].mtu: the link crosses machines, and %d does not fit in the underlay with the %s tunnel; use at most %d",
				badPath, line, fit+1, tunnel, fit)
			if !strings.Contains(errOut, want) {
				t.Errorf("m%d: stderr is\n%s\nwant it to contain %q", i, errOut, want)
			}
			if out != "" {
				t.Errorf("m%d: stdout is %q, want nothing", i, out)
			}
			if got := m.links(t, i); !slices.Equal(got, links) {
				t.Errorf("m%d: links were %v before the refused up, %v after", i, links, got)
			}
			if got := m.nodeProcs(i); !slices.Equal(got, procs) {
				t.Errorf("m%d: node processes were\n%v\nbefore the refused up, after:\n%v", i, procs, got)
			}
			if _, err := os.Stat(filepath.Join(m.state(i), "networks", name+"-big")); err == nil {
				t.Errorf("m%d: the refused network has a record", i)
			}
			ls := m.trellis(t, i, "ls")
			if strings.Contains(ls, name+"-big") || !strings.Contains(ls, name) {
				t.Errorf("m%d: ls after the refused up:\n%s", i, ls)
			}
		}
	})

	t.Run("mtu changed live", func(t *testing.T) { checkTunnelMTULive(t, m, name, tunnel, fit) })

	for i := 1; i <= 3; i++ {
		m.trellis(t, i, "down", name)
	}
}

// TestOSPFRingOverThreeMachines brings up the OSPF ring example with a hosts section added, so
// that placement spreads its routers over three machines, on all three at once, and waits
// until every router reaches every other's loopback.
func TestOSPFRingOverThreeMachines(t *testing.T) {
	testkit.RequireTool(t, "bird", "scripts/setup.sh installs bird2")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ring, err := os.ReadFile(filepath.Join(root, "examples/ospf-ring/ring.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tunnel := range mhTunnels {
		t.Run(tunnel, func(t *testing.T) {
			m := machinesUp(t, 3)
			const name = "ospf-ring"
			doc := strings.Replace(string(ring), "\nname: ospf-ring\n", "\nname: ospf-ring\n"+m.hostsYAML(tunnel), 1)
			if doc == string(ring) {
				t.Fatalf("examples/ospf-ring/ring.yaml has no line `name: ospf-ring`")
			}
			path := writeTopo(t, doc)

			began := time.Now()
			errs := make([]error, m.n)
			var wg sync.WaitGroup
			for i := 1; i <= m.n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if out, errOut, err := m.run(i, "up", path); err != nil {
						errs[i-1] = fmt.Errorf("on m%d: up: %v\n%s%s", i, err, out, errOut)
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			upTook := time.Since(began)

			// Placement: balanced, in file order; r1-r2, r2-r3 and r3-r4 cross machines.
			where := m.where(t, name)
			want := map[string]int{"r1": 1, "r2": 2, "r3": 3, "r4": 1}
			if !mapsEqual(where, want) {
				t.Errorf("routers are on machines %v, want %v", where, want)
			}
			crossing := 0
			for i := 1; i <= m.n; i++ {
				for _, l := range m.inspect(t, i, name).Links {
					if len(l.Tunnels) > 0 {
						crossing++
					}
				}
			}
			if crossing != 6 { // 3 links, each seen from both of its machines
				t.Errorf("%d link ends cross machines, want 6", crossing)
			}

			deadline := began.Add(60 * time.Second)
			for {
				var missing []string
				for r := 1; r <= 4; r++ {
					for o := 1; o <= 4; o++ {
						if o == r {
							continue
						}
						node := fmt.Sprintf("r%d", r)
						if _, _, err := m.exec(where[node], name, node, "ping", "-c1", "-W1", "-q", fmt.Sprintf("10.255.0.%d", o)); err != nil {
							missing = append(missing, fmt.Sprintf("r%d->r%d", r, o))
						}
					}
				}
				if len(missing) == 0 {
					break
				}
				if time.Now().After(deadline) {
					var b strings.Builder
					for r := 1; r <= 4; r++ {
						node := fmt.Sprintf("r%d", r)
						out, errOut, _ := m.exec(where[node], name, node, "birdc", "-s", "/run/bird/bird.ctl", "show", "ospf", "neighbors")
						routes, _, _ := m.exec(where[node], name, node, "ip", "-4", "route")
						fmt.Fprintf(&b, "--- %s on m%d:\n%s%s%s", node, where[node], out, errOut, routes)
					}
					t.Fatalf("after %v, %d of 12 loopback pings still fail: %v\n%s", time.Since(began).Round(time.Second), len(missing), missing, b.String())
				}
				time.Sleep(time.Second)
			}
			t.Logf("%s: up on 3 machines took %.2fs; every router reaches every loopback %.1fs after up began",
				tunnel, upTook.Seconds(), time.Since(began).Seconds())
			for i := 1; i <= m.n; i++ {
				m.trellis(t, i, "down", name)
			}
		})
	}
}

// isoTopo2 is a network over two machines, a point-to-point link and a two-member LAN between
// them; only the name differs between the copies of TestTunnelIsolation.
func isoTopo2(name, hosts string) string {
	return fmt.Sprintf(`name: %s
%snodes:
  a:
    host: m1
    addresses:
      eth1: [10.0.0.1/24, fd00::1/64]
      eth2: [10.0.9.1/24, fd09::1/64]
  b:
    host: m2
    addresses:
      eth1: [10.0.0.2/24, fd00::2/64]
      eth2: [10.0.9.2/24, fd09::2/64]
links:
  - name: p2p
    endpoints: [a:eth1, b:eth1]
  - name: lan
    endpoints: [a:eth2, b:eth2]
    connector: bridge
`, name, hosts)
}

func TestTunnelIsolation(t *testing.T) {
	for _, tunnel := range mhTunnels {
		t.Run(tunnel, func(t *testing.T) {
			m := machinesUp(t, 2)
			nets := []string{"isoa-" + tunnel, "isob-" + tunnel}
			A, B := nets[0], nets[1]
			for _, n := range nets {
				m.upAll(t, writeTopo(t, isoTopo2(n, m.hostsYAML(tunnel))), n)
			}

			// Tunnels: a different key for every link of either network, the same on both
			// machines.
			keys, vnis := map[uint32]string{}, map[uint32]string{}
			for _, n := range nets {
				for _, lname := range []string{"p2p", "lan"} {
					k1 := m.inspect(t, 1, n).link(t, lname).Tunnels
					k2 := m.inspect(t, 2, n).link(t, lname).Tunnels
					if len(k1) != 1 || len(k2) != 1 {
						t.Fatalf("%s link %s: tunnels %+v on m1, %+v on m2; want one each", n, lname, k1, k2)
					}
					if k1[0].Key != k2[0].Key {
						t.Errorf("%s link %s: key %#08x on m1, %#08x on m2", n, lname, k1[0].Key, k2[0].Key)
					}
					if other, dup := keys[k1[0].Key]; dup {
						t.Errorf("%s link %s has key %#08x, as %s does", n, lname, k1[0].Key, other)
					}
					keys[k1[0].Key] = n + " " + lname
					vni := k1[0].Key & 0xffffff
					if other, dup := vnis[vni]; dup {
						t.Errorf("%s link %s has the VNI %d of %s", n, lname, vni, other)
					}
					vnis[vni] = n + " " + lname
				}
			}
			t.Logf("keys: %v", keys)

			// Traffic in A must not reach B: wait until B is quiet, then send in A and check that
			// B's counters (on both machines) and listeners in B saw nothing, while the same
			// listeners in A did. B has had no traffic of its own yet, so that no neighbour
			// re-probing moves its counters; it is pinged after.
			quietB := m.waitQuiet(t, B)
			// EGRE drop counters (of each machine, all networks) before A's traffic. They need not
			// be zero: what m1 sent in B before B was up on m2 had keys m2 did not know yet.
			egreBefore := map[int]map[string]uint64{}
			if tunnel == "egre" {
				for i := 1; i <= 2; i++ {
					egreBefore[i] = m.inspect(t, i, A).EGRE
				}
				t.Logf("EGRE counters before the test traffic: m1 %v, m2 %v", egreBefore[1], egreBefore[2])
			}
			payload := []byte("trellis-it-tunnel-isolation-" + nonce())
			rA1 := m.listenFrame(t, 2, A, "b", "eth1", payload, 4*time.Second)
			rA2 := m.listenFrame(t, 2, A, "b", "eth2", payload, 4*time.Second)
			rB1 := m.listenFrame(t, 2, B, "b", "eth1", payload, 4*time.Second)
			rB2 := m.listenFrame(t, 2, B, "b", "eth2", payload, 4*time.Second)
			rBa := m.listenFrame(t, 1, B, "a", "eth1", payload, 4*time.Second)
			beforeA := m.counters(t, A)
			m.sendFrame(t, 1, A, "a", "eth1", "ff:ff:ff:ff:ff:ff", payload, 5)
			m.sendFrame(t, 1, A, "a", "eth2", "ff:ff:ff:ff:ff:ff", payload, 5)
			m.mustExec(t, 1, A, "a", "ping", "-c", "50", "-i", "0.01", "-W", "2", "10.0.0.2")
			m.mustExec(t, 1, A, "a", "ping", "-6", "-c", "20", "-i", "0.01", "-W", "2", "fd00::2")
			m.mustExec(t, 1, A, "a", "ping", "-c", "20", "-i", "0.01", "-W", "2", "10.0.9.2")
			m.mustExec(t, 2, A, "b", "ping", "-6", "-c", "20", "-i", "0.01", "-W", "2", "fd09::1")
			// Nodes ignore broadcast echo requests: only the requests count, not the exit code.
			m.exec(1, A, "a", "ping", "-b", "-c", "5", "-i", "0.01", "-W", "1", "10.0.9.255")
			if rA1.result(t) == nil || rA2.result(t) == nil {
				t.Errorf("the broadcast frames sent in %s did not reach %s's b", A, A)
			}
			for _, r := range []*frameReceiver{rB1, rB2, rBa} {
				if f := r.result(t); f != nil {
					t.Errorf("a frame sent in %s reached %s: %+v", A, r.where, f)
				}
			}
			afterA := m.counters(t, A)
			afterB := m.counters(t, B)
			if got := afterA["m2 b:eth1 rx"] - beforeA["m2 b:eth1 rx"]; got < 75 {
				t.Errorf("%s's b:eth1 received %d packets during the test traffic, want at least 75", A, got)
			}
			if got := afterA["m2 b:eth2 rx"] - beforeA["m2 b:eth2 rx"]; got < 45 {
				t.Errorf("%s's b:eth2 received %d packets during the test traffic, want at least 45", A, got)
			}
			for k, v := range afterB {
				if v != quietB[k] {
					t.Errorf("%s counter %s went from %d to %d while only %s had traffic", B, k, quietB[k], v, A)
				}
			}
			t.Logf("%s b received %d (p2p) and %d (lan) packets; %s counters unchanged: %v", A,
				afterA["m2 b:eth1 rx"]-beforeA["m2 b:eth1 rx"], afterA["m2 b:eth2 rx"]-beforeA["m2 b:eth2 rx"], B, afterB)
			if tunnel == "egre" {
				for i := 1; i <= 2; i++ {
					info := m.inspect(t, i, A)
					for _, f := range []string{"UnknownKey", "WrongSource", "Errors"} {
						if v := info.egre(t, f); v != egreBefore[i][f] {
							t.Errorf("m%d: EGRE %s went from %d to %d during the test traffic", i, f, egreBefore[i][f], v)
						}
					}
				}
			}
			for _, n := range nets {
				m.ping(t, 1, n, "a", "10.0.0.2")
				m.ping(t, 2, n, "b", "fd00::1")
				m.ping(t, 1, n, "a", "10.0.9.2")
			}
			for i := 1; i <= 2; i++ {
				m.trellis(t, i, "down", A, B)
			}
		})
	}
}

// pairTopo is a network of two nodes on two machines joined by one point-to-point link ab.
func pairTopo(name, hosts string) string {
	return fmt.Sprintf(`name: %s
%snodes:
  a:
    host: m1
    addresses:
      eth1: [10.0.0.1/24, fd00::1/64]
  b:
    host: m2
    addresses:
      eth1: [10.0.0.2/24, fd00::2/64]
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
`, name, hosts)
}

// TestEGREWireFormat captures the underlay between m1 and the switch while nodes talk over an
// EGRE link, and decodes every frame byte by byte (and with tshark, if installed).
func TestEGREWireFormat(t *testing.T) {
	m := machinesUp(t, 2)
	const name = "egrewire"
	m.upAll(t, writeTopo(t, pairTopo(name, m.hostsYAML("egre"))), name)
	i1, i2 := m.inspect(t, 1, name), m.inspect(t, 2, name)
	t1, t2 := i1.link(t, "ab").Tunnels, i2.link(t, "ab").Tunnels
	if len(t1) != 1 || len(t2) != 1 || t1[0].Key != t2[0].Key {
		t.Fatalf("link ab: tunnels %+v on m1, %+v on m2; want one each, with the same key", t1, t2)
	}
	key := t1[0].Key
	macA, macB := mustMAC(t, i1.mac(t, "a", "eth1")), mustMAC(t, i2.mac(t, "b", "eth1"))
	m1, m2 := netip.MustParseAddr(m.addr(1)), netip.MustParseAddr(m.addr(2))
	eth0 := map[netip.Addr]string{m1: m.mac[0], m2: m.mac[1]}
	node := map[netip.Addr]string{m1: macA.String(), m2: macB.String()}

	// The capture runs on the switch's port to m1: it sees what crosses the wire both ways.
	c := m.captureGRE(t, 0, "m1")
	m.mustExec(t, 1, name, "a", "ip", "neigh", "flush", "dev", "eth1")
	m.mustExec(t, 2, name, "b", "ip", "neigh", "flush", "dev", "eth1")
	m.ping(t, 1, name, "a", "10.0.0.2")
	m.ping(t, 1, name, "a", "fd00::2")
	payload := []byte("trellis-it-wire-" + nonce())
	m.sendFrame(t, 1, name, "a", "eth1", macB.String(), payload, 1)
	frames := c.stop(t)
	if len(frames) == 0 {
		t.Fatalf("the capture on the underlay saw no GRE packet")
	}

	// kinds counts what was seen: "from mI: inner type / what".
	kinds := map[string]int{}
	for n, f := range frames {
		p, err := decodeEGRE(f.data)
		if err != nil {
			t.Errorf("frame %d: %v\n%s", n, err, hex.Dump(f.data))
			continue
		}
		bad := func(format string, args ...any) {
			t.Errorf("frame %d: "+format+"\n%s", append(append([]any{n}, args...), hex.Dump(f.data))...)
		}
		from, to := p.src, p.dst
		if !(from == m1 && to == m2) && !(from == m2 && to == m1) {
			bad("outer IPv4 %v -> %v, want between %v and %v", from, to, m1, m2)
			continue
		}
		if f.outgoing != (from == m2) {
			bad("from %v, but captured going %s m1", from, map[bool]string{true: "to", false: "from"}[f.outgoing])
		}
		if p.outerType != 0x0800 {
			bad("outer ethertype %#04x, want 0x0800", p.outerType)
		}
		if p.outerSrc.String() != eth0[from] || p.outerDst.String() != eth0[to] {
			bad("outer MACs %s -> %s, want the machines' eth0 %s -> %s", p.outerSrc, p.outerDst, eth0[from], eth0[to])
		}
		if p.verIHL != 0x45 || p.proto != 47 || p.ttl != 64 || p.fragOff != 0x4000 || !p.checksumOK {
			bad("outer IPv4: version/IHL %#02x proto %d TTL %d flags/fragment %#04x checksum ok %v; want 0x45, 47, 64, 0x4000 (DF), ok",
				p.verIHL, p.proto, p.ttl, p.fragOff, p.checksumOK)
		}
		if int(p.totLen)+14 != len(f.data) {
			bad("IPv4 total length %d in a frame of %d bytes", p.totLen, len(f.data))
		}
		if p.greFlags != 0x2000 || p.greProto != 0x6558 || p.key != key {
			bad("GRE flags/version %#04x protocol %#04x key %#08x; want 0x2000, 0x6558, %#08x", p.greFlags, p.greProto, p.key, key)
		}
		if p.innerSrc().String() != node[from] {
			bad("inner source MAC %s, want the sending node's %s", p.innerSrc(), node[from])
		}
		in := p.inner
		what := ""
		switch p.innerType() {
		case 0x0800:
			if len(in) >= 35 && in[14] == 0x45 && in[23] == 1 {
				what = fmt.Sprintf("icmp %v->%v type %d", netip.AddrFrom4([4]byte(in[26:30])), netip.AddrFrom4([4]byte(in[30:34])), in[34])
			}
		case 0x0806:
			if len(in) >= 42 && binary.BigEndian.Uint16(in[14:]) == 1 && binary.BigEndian.Uint16(in[16:]) == 0x0800 {
				what = fmt.Sprintf("arp op %d sender %s %v", binary.BigEndian.Uint16(in[20:]), macString(in[22:28]), netip.AddrFrom4([4]byte(in[28:32])))
			}
		case 0x86dd:
			switch {
			case len(in) >= 55 && in[20] == 58:
				what = fmt.Sprintf("icmpv6 type %d", in[54])
			case len(in) >= 54:
				what = fmt.Sprintf("ipv6 next header %d", in[20])
			}
		case frameEtherType:
			if bytes.HasPrefix(in[14:], payload) && p.innerDst().String() == macB.String() {
				what = "our frame"
			}
		}
		kinds[fmt.Sprintf("from %v: %#04x %s", from, p.innerType(), what)]++
	}
	var seen []string
	for k, v := range kinds {
		seen = append(seen, fmt.Sprintf("%s (%d)", k, v))
	}
	sort.Strings(seen)
	t.Logf("%d GRE packets on the wire, key %#08x:\n%s", len(frames), key, strings.Join(seen, "\n"))
	for _, w := range []string{
		fmt.Sprintf("from %v: 0x0806 arp op 1 sender %s 10.0.0.1", m1, macA),
		fmt.Sprintf("from %v: 0x0806 arp op 2 sender %s 10.0.0.2", m2, macB),
		fmt.Sprintf("from %v: 0x0800 icmp 10.0.0.1->10.0.0.2 type 8", m1),
		fmt.Sprintf("from %v: 0x0800 icmp 10.0.0.2->10.0.0.1 type 0", m2),
		fmt.Sprintf("from %v: 0x86dd icmpv6 type 135", m1), // neighbour solicitation
		fmt.Sprintf("from %v: 0x86dd icmpv6 type 128", m1), // echo request
		fmt.Sprintf("from %v: 0x86dd icmpv6 type 129", m2), // echo reply
		fmt.Sprintf("from %v: 0x88b5 our frame", m1),
	} {
		if kinds[w] == 0 {
			t.Errorf("no GRE packet on the wire carried: %s", w)
		}
	}

	t.Run("tshark", func(t *testing.T) {
		testkit.RequireTool(t, "tshark", "scripts/test.sh installs it (apt-get install tshark) to cross-check the decoding of the capture")
		pcap := filepath.Join(t.TempDir(), "egre.pcap")
		writePcap(t, pcap, frames)
		out, errOut, err := hostOutput("tshark", "-n", "-r", pcap, "-V")
		if err != nil {
			t.Fatalf("tshark -r %s -V: %v\n%s%s", pcap, err, out, errOut)
		}
		for _, w := range []string{
			"Generic Routing Encapsulation (Transparent Ethernet bridging)",
			"Flags and Version: 0x2000",
			"Protocol Type: Transparent Ethernet bridging (0x6558)",
			fmt.Sprintf("Key: 0x%08x", key),
			"Address Resolution Protocol (request)",
			"Address Resolution Protocol (reply)",
			"Internet Control Message Protocol v6",
			"Internet Control Message Protocol\n",
			"Src: " + macA.String(),
			"Src: " + macB.String(),
		} {
			if !strings.Contains(out, w) {
				t.Errorf("tshark -V does not say %q", w)
			}
		}
		if n := strings.Count(out, "\nEthernet II, Src: "); n != 2*len(frames) {
			t.Errorf("tshark -V shows %d Ethernet II headers in %d frames, want two per frame (outer, inner)", n, len(frames))
		}
		// Frame by frame: GRE key, both source MACs and both ethertypes as tshark reads them.
		fields, errOut, err := hostOutput("tshark", "-n", "-r", pcap, "-T", "fields", "-E", "separator=;", "-e", "gre.key", "-e", "eth.src", "-e", "eth.type")
		if err != nil {
			t.Fatalf("tshark -T fields: %v\n%s%s", err, fields, errOut)
		}
		lines := strings.Split(strings.TrimSpace(fields), "\n")
		if len(lines) != len(frames) {
			t.Fatalf("tshark printed %d lines for %d frames:\n%s", len(lines), len(frames), fields)
		}
		for n, line := range lines {
			p, err := decodeEGRE(frames[n].data)
			if err != nil {
				continue
			}
			want := fmt.Sprintf("%#08x;%s,%s;0x0800,%#04x", key, p.outerSrc, p.innerSrc(), p.innerType())
			if line != want {
				t.Errorf("frame %d: tshark reads %q, this test %q", n, line, want)
			}
		}
		t.Logf("tshark decoded %d frames as Ethernet / IPv4 / GRE key %#08x / Ethernet, as this test did", len(frames), key)
	})
	for i := 1; i <= 2; i++ {
		m.trellis(t, i, "down", name)
	}
}

func macString(b []byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

// TestEGREDropsForeignFrames injects EGRE packets into m1 from m2's underlay interface: with
// a key no tunnel has, and with the link's key from an address that is not the link's peer.
// Both must be dropped and counted, and their inner frames reach no node; a packet with the
// right key from the right address, sent the same way, must arrive.
func TestEGREDropsForeignFrames(t *testing.T) {
	m := machinesUp(t, 2)
	const name = "egredrop"
	m.upAll(t, writeTopo(t, pairTopo(name, m.hostsYAML("egre"))), name)
	key := m.inspect(t, 1, name).link(t, "ab").Tunnels[0].Key
	wrongKey := key ^ 0x00a5a500
	mac1, mac2 := mustMAC(t, m.mac[0]), mustMAC(t, m.mac[1])
	m1, m2 := netip.MustParseAddr(m.addr(1)), netip.MustParseAddr(m.addr(2))
	stranger := netip.MustParseAddr("198.18.0.99")

	inner := func(magic []byte) []byte {
		f := append(mustMAC(t, "ff:ff:ff:ff:ff:ff"), mustMAC(t, "02:00:5e:10:00:99")...)
		f = append(append(f, 0x88, 0xb5), magic...)
		for len(f) < 60 {
			f = append(f, 0)
		}
		return f
	}
	counters := func() (map[string]uint64, map[string]uint64) {
		return m.inspect(t, 1, name).EGRE, m.inspect(t, 2, name).EGRE
	}
	// settle waits until m1's drop counters reach the given values (they are counted as the
	// packets arrive) and returns m1's and m2's counters.
	settle := func(unknown, wrong uint64) (map[string]uint64, map[string]uint64) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			c1, _ := counters()
			if (c1["UnknownKey"] >= unknown && c1["WrongSource"] >= wrong) || time.Now().After(deadline) {
				time.Sleep(500 * time.Millisecond) // and nothing more comes
				return counters()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	inject := func(frames ...string) {
		t.Helper()
		args := append([]string{"python3", "-c", sendRawScript, "eth0"}, frames...)
		if out, err := m.inNS(2, args...); err != nil {
			t.Fatalf("injecting from m2's eth0: %v\n%s", err, out)
		}
	}

	magic := []byte("trellis-it-foreign-" + nonce())
	const nUnknown, nWrong = 5, 4
	unknown := egreFrame(mac1, mac2, m2, m1, wrongKey, inner(magic))
	wrongSrc := egreFrame(mac1, mac2, stranger, m1, key, inner(magic))
	before1, before2 := counters()
	for _, f := range []string{"Decapsulated", "UnknownKey", "WrongSource", "Errors"} {
		if _, ok := before1[f]; !ok {
			t.Fatalf("inspect --json on m1 has no egre.%s: %v", f, before1)
		}
	}
	ra := m.listenFrame(t, 1, name, "a", "eth1", magic, 3*time.Second)
	rb := m.listenFrame(t, 2, name, "b", "eth1", magic, 3*time.Second)
	backlog := backlogDrops()
	inject(fmt.Sprintf("%x:%d", unknown, nUnknown), fmt.Sprintf("%x:%d", wrongSrc, nWrong))
	after1, after2 := settle(before1["UnknownKey"]+nUnknown, before1["WrongSource"]+nWrong)
	note := ""
	if d := backlogDrops() - backlog; d > 0 {
		note = fmt.Sprintf(" (meanwhile the kernel dropped %d packets machine-wide for full input backlogs: another workload is flooding this machine)", d)
	}
	if d := after1["UnknownKey"] - before1["UnknownKey"]; d != nUnknown {
		t.Errorf("m1: UnknownKey rose by %d, want %d (sent with key %#08x)%s", d, nUnknown, wrongKey, note)
	}
	if d := after1["WrongSource"] - before1["WrongSource"]; d != nWrong {
		t.Errorf("m1: WrongSource rose by %d, want %d (sent with the link's key %#08x from %v)%s", d, nWrong, key, stranger, note)
	}
	if d := after1["Errors"] - before1["Errors"]; d != 0 {
		t.Errorf("m1: Errors rose by %d", d)
	}
	for _, f := range []string{"UnknownKey", "WrongSource", "Errors"} {
		if after2[f] != before2[f] {
			t.Errorf("m2: %s went from %d to %d, but nothing was sent to m2", f, before2[f], after2[f])
		}
	}
	for _, r := range []*frameReceiver{ra, rb} {
		if f := r.result(t); f != nil {
			t.Errorf("an injected frame with a wrong key or source reached %s: %+v", r.where, f)
		}
	}
	t.Logf("m1 EGRE counters: before %v, after %v", before1, after1)

	// The control: the same injection with the right key and source is decapsulated.
	good := []byte("trellis-it-foreign-ok-" + nonce())
	ra = m.listenFrame(t, 1, name, "a", "eth1", good, 5*time.Second)
	inject(fmt.Sprintf("%x:%d", egreFrame(mac1, mac2, m2, m1, key, inner(good)), 3))
	f := ra.result(t)
	if f == nil {
		t.Fatalf("an injected frame with the link's key from m2 did not reach m1's a:eth1: the injection itself does not work")
	}
	if f.Src != "02005e100099" || f.Dst != "ffffffffffff" {
		t.Errorf("the injected frame arrived with src %s dst %s", f.Src, f.Dst)
	}
	final1, _ := counters()
	if d := final1["Decapsulated"] - after1["Decapsulated"]; d < 3 {
		t.Errorf("m1: Decapsulated rose by %d after 3 good packets, want at least 3", d)
	}
	if final1["UnknownKey"] != after1["UnknownKey"] || final1["WrongSource"] != after1["WrongSource"] {
		t.Errorf("m1: drop counters moved with good packets: %v -> %v", after1, final1)
	}
	for i := 1; i <= 2; i++ {
		m.trellis(t, i, "down", name)
	}
}

// TestDownOnEveryMachineLeavesNothing checks explicitly what every test's cleanup checks: after
// `down` on every machine, each holds only lo and eth0, eth0 has its qdiscs as before and no
// filter, no node process is left; and the root namespace holds nothing of the test's either
// (no eBPF program, no node, no namespace in use) while the machines still exist.
func TestDownOnEveryMachineLeavesNothing(t *testing.T) {
	for _, tunnel := range mhTunnels {
		t.Run(tunnel, func(t *testing.T) {
			m := machinesUp(t, 3) // its cleanup checks the host against a snapshot before the machines
			name := "downall-" + tunnel
			m.upAll(t, writeTopo(t, spreadTopo(name, m.hostsYAML(tunnel), tunnelMTU(tunnel), "    rate: 20mbit\n")), name)
			m.ping(t, 1, name, "a", "10.0.1.2")
			m.ping(t, 1, name, "a", "10.0.9.3")
			for i := 1; i <= 3; i++ {
				if got := m.links(t, i); len(got) <= 2 {
					t.Errorf("m%d has only links %v while the network is up", i, got)
				}
				if len(m.nodeProcs(i)) == 0 {
					t.Errorf("m%d has no node process while the network is up", i)
				}
				filters, _ := m.inNS(i, "tc", "filter", "show", "dev", "eth0", "ingress")
				// EGRE's decapsulation, which also vets VXLAN's sources.
				if !strings.Contains(filters, "trellis_egre_dec") {
					t.Errorf("m%d: eth0 ingress filters while up:\n%s(want the decapsulation program)", i, filters)
				}
			}
			for i := 1; i <= 3; i++ {
				m.trellis(t, i, "down", name)
			}
			for i := 1; i <= 3; i++ {
				m.checkMachineClean(t, i)
				if got := listNetworksOn(t, m, i); len(got) != 0 {
					t.Errorf("m%d: ls lists %v after down", i, got)
				}
			}
		})
	}
}

// listNetworksOn returns the network names `trellis ls` prints on machine i.
func listNetworksOn(t *testing.T, m *machines, i int) []string {
	t.Helper()
	out := m.trellis(t, i, "ls")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "NETWORK") {
		t.Fatalf("trellis ls on m%d: no header line:\n%s", i, out)
	}
	var names []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// rateTopo2 is a 50mbit link between two machines, an uncapped one beside it, and an uncapped
// link inside m1, for comparison.
func rateTopo2(name, hosts string) string {
	return fmt.Sprintf(`name: %s
%snodes:
  a:
    host: m1
    addresses:
      eth1: [10.0.0.1/24]
      eth2: [10.0.2.1/24]
      eth3: [10.0.3.1/24]
  a2:
    host: m1
    addresses:
      eth1: [10.0.3.2/24]
  b:
    host: m2
    addresses:
      eth1: [10.0.0.2/24]
      eth2: [10.0.2.2/24]
links:
  - name: capped
    endpoints: [a:eth1, b:eth1]
    rate: 50mbit
  - name: cross
    endpoints: [a:eth2, b:eth2]
  - name: local
    endpoints: [a:eth3, a2:eth1]
`, name, hosts)
}

func TestRateOverTunnel(t *testing.T) {
	testkit.RequireTool(t, "iperf3", "scripts/setup.sh installs iperf3")
	const capBPS, duration = 50e6, 6
	var summary []string
	for _, tunnel := range mhTunnels {
		t.Run(tunnel, func(t *testing.T) {
			m := machinesUp(t, 2)
			name := "tunrate-" + tunnel
			m.upAll(t, writeTopo(t, rateTopo2(name, m.hostsYAML(tunnel))), name)
			for i := 1; i <= 2; i++ {
				if r := m.inspect(t, i, name).link(t, "capped").Rate; r != "50mbit" {
					t.Errorf("m%d: inspect shows rate %q, want 50mbit", i, r)
				}
			}
			a, b, a2 := mhEndpoint{1, "a", "eth1"}, mhEndpoint{2, "b", "eth1"}, mhEndpoint{1, "a2", "eth1"}
			for _, c := range []struct {
				what    string
				client  mhEndpoint
				server  mhEndpoint
				addr    string
				reverse bool
				capped  bool
			}{
				{"50mbit m1->m2", a, b, "10.0.0.2", false, true},
				{"50mbit m2->m1", a, b, "10.0.0.2", true, true},
				{"uncapped m1->m2", a, b, "10.0.2.2", false, false},
				{"uncapped on m1", a, a2, "10.0.3.2", false, false},
			} {
				backlog, shaped := backlogDrops(), m.tbfDrops(t)
				runs := 1
				if c.capped {
					runs = rateRuns
				}
				res := medianRun(runs, func() *iperfResult { return m.iperf(t, name, c.client, c.server, c.addr, duration, c.reverse) })
				backlog, shaped = backlogDrops()-backlog, m.tbfDrops(t)-shaped
				got := res.End.SumReceived.BitsPerSecond
				line := fmt.Sprintf("%-5s %-16s receiver %12.0f bit/s (%.1f s, %d bytes)", tunnel, c.what, got, res.End.SumReceived.Seconds, res.End.SumReceived.Bytes)
				mtu := 1500 - spec.TunnelOverhead(tunnel)
				if c.capped {
					line += fmt.Sprintf("  on the wire %.0f bit/s, ratio to cap %.4f", onWire(got, mtu), onWire(got, mtu)/capBPS)
				}
				line += fmt.Sprintf("  [sender %.0f bit/s, %d retransmits; drops: %d by shapers, %d machine-wide for full input backlogs]",
					res.End.SumSent.BitsPerSecond, res.End.SumSent.Retransmits, shaped, backlog)
				t.Log(line)
				summary = append(summary, line)
				// Over a tunnel the test checks that the sending machine enforces the cap (never
				// more than 5 % over it) and that the link still carries most of it. Accuracy
				// within ±5 % is TestRateAccuracy's: tunnelled TCP here shares two cores with
				// the encapsulation of both machines and varies more (0.84-0.97 seen under load).
				if ratio := onWire(got, mtu) / capBPS; c.capped && (ratio < 0.75 || ratio > 1.05) {
					note := ""
					if backlog > 0 {
						note = fmt.Sprintf(" (meanwhile the kernel dropped %d packets for full input backlogs: another workload may be flooding this machine)", backlog)
					}
					t.Errorf("%s over %s: measured %.0f bit/s on a 50mbit link: %.1f%% of the cap, want at most +5%% and at least 75%%%s", c.what, tunnel, got, 100*ratio, note)
				}
			}
			// Live rate changes swap the sending path (with EGRE: encapsulation on the port
			// when uncapped, through the tunnel port's shaper when capped); every frame type
			// must cross either way, and the cap must hold again once it is back.
			topo := rateTopo2(name, m.hostsYAML(tunnel))
			for _, rate := range []string{"", "20mbit"} {
				line := ""
				if rate != "" {
					line = "    rate: " + rate + "\n"
				}
				path := writeTopo(t, strings.Replace(topo, "    rate: 50mbit\n", line, 1))
				for i := 1; i <= 2; i++ {
					if out := m.trellis(t, i, "up", path); !strings.Contains(out, "~ link capped: rate ") {
						t.Errorf("up with rate %q on m%d said %q, want the rate of link capped changed", rate, i, out)
					}
					if r := m.inspect(t, i, name).link(t, "capped").Rate; r != rate {
						t.Errorf("m%d: inspect shows rate %q, want %q", i, r, rate)
					}
				}
				m.ping(t, 1, name, "a", "10.0.0.2")
				m.ping(t, 2, name, "b", "10.0.0.1")
				m.checkFrameCrosses(t, name, a, b)
				m.checkFrameCrosses(t, name, b, a)
			}
			res := m.iperf(t, name, a, b, "10.0.0.2", duration, false)
			got := onWire(res.End.SumReceived.BitsPerSecond, 1500-spec.TunnelOverhead(tunnel))
			t.Logf("%s after live rate changes, 20mbit m1->m2: %.0f bit/s on the wire", tunnel, got)
			if got > 1.05*20e6 || got < 0.75*20e6 {
				t.Errorf("after live rate changes over %s: %.0f bit/s on the wire on a 20mbit link, want at most +5%% and at least 75%%", tunnel, got)
			}
			for i := 1; i <= 2; i++ {
				m.trellis(t, i, "down", name)
			}
		})
	}
	t.Logf("iperf3 over tunnels (TCP payload received vs. the link cap):\n%s", strings.Join(summary, "\n"))
}
