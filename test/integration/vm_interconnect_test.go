//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ospfRouter is a node of vmicTopo running BIRD's OSPFv2 on its eth interfaces, with its
// loopback 10.255.0.<id> as a stub, and the settings lines extra.
func ospfRouter(name, extra string, id int, addrs string) string {
	head := "  " + name + ":\n" + extra
	return head + fmt.Sprintf(`    addresses:
      lo: [10.255.0.%d/32]
%s    files:
      - path: /etc/bird/bird.conf
        content: |
          router id 10.255.0.%d;
          protocol device { scan time 10; }
          protocol kernel { ipv4 { import all; export all; }; learn; scan time 10; }
          protocol ospf v2 {
            ipv4 { import all; export none; };
            area 0 {
              interface "eth*" { type ptp; hello 1; dead 4; };
              interface "lo" { stub yes; };
            };
          }
    exec:
      - mkdir -p /run/bird
      - bird -c /etc/bird/bird.conf -s /run/bird/bird.ctl
`, id, addrs, id)
}

// vmicTopo is a VM m whose ports are macvtaps (two vCPUs pinned and reserved, two queue pairs), on a capped link
// to a container a, and a VM g whose ports are taps in bridges, on a link to a container c.
// Each pair runs OSPF. Before the change, g has a second link to c; after it, m has a second
// link to a instead.
func vmicTopo(changed bool) string {
	mAddrs, aAddrs := "      eth1: [10.0.1.1/24, fd00:1::1/64]\n", "      eth1: [10.0.1.2/24, fd00:1::2/64]\n"
	gAddrs, cAddrs := "      eth1: [10.0.2.1/24, fd00:2::1/64]\n", "      eth1: [10.0.2.2/24, fd00:2::2/64]\n"
	link := "  - endpoints: [g:eth2, c:eth2]\n"
	if changed {
		mAddrs += "      eth2: [10.0.4.1/24]\n"
		aAddrs += "      eth2: [10.0.4.2/24]\n"
		link = "  - endpoints: [m:eth2, a:eth2]\n"
	} else {
		gAddrs += "      eth2: [10.0.3.1/24]\n"
		cAddrs += "      eth2: [10.0.3.2/24]\n"
	}
	return "name: vmic\nnodes:\n" +
		ospfRouter("m", "    kind: vm\n    cpu: 2\n    vm: {interconnect: macvtap, queues: 2, pin: {vcpu: [1]}, reserve: 50% 20ms}\n", 1, mAddrs) +
		ospfRouter("a", "", 2, aAddrs) +
		ospfRouter("g", "    kind: vm\n    vm: {interconnect: bridge}\n", 3, gAddrs) +
		ospfRouter("c", "", 4, cAddrs) + `links:
  - endpoints: [m:eth1, a:eth1]
    rate: 10mbit
  - endpoints: [g:eth1, c:eth1]
` + link
}

// TestVMInterconnect checks the macvtap and bridge interconnects of VM nodes (the tap one is
// TestVMNode's): ARP, IPv6 ND, ping and OSPF with a container over a shortbridge, a rate cap on
// a macvtap port, a link removed live (its NIC leaves the guest) and one added live (a macvtap
// hot-plugged), and down leaving nothing.
func TestVMInterconnect(t *testing.T) {
	needQEMU(t)
	e := start(t)
	path := writeTopo(t, vmicTopo(false))
	mustTrellis(t, e.state, "up", path)
	for _, c := range []struct{ vm, ctr, v4, v6, lo string }{
		{"m", "a", "10.0.1.1", "fd00:1::1", "10.255.0.1"},
		{"g", "c", "10.0.2.1", "fd00:2::1", "10.255.0.3"},
	} {
		ping(t, e.state, "vmic", c.ctr, c.v4)
		ping(t, e.state, "vmic", c.ctr, c.v6)
		if out := mustExec(t, e.state, "vmic", c.ctr, "ip", "neigh", "show", c.v4); !strings.Contains(out, "lladdr") {
			t.Errorf("%s has no ARP entry for VM %s: %q", c.ctr, c.vm, out)
		}
		waitFor(t, 90*time.Second, "OSPF route from "+c.ctr+" to VM "+c.vm+"'s loopback", func() (bool, string) {
			out, _, _ := execIn(t, e.state, "vmic", c.ctr, "ip", "route", "show", c.lo)
			return strings.Contains(out, "proto bird"), out
		})
		ping(t, e.state, "vmic", c.ctr, c.lo)
	}
	if q := mustExec(t, e.state, "vmic", "m", "ls", "/sys/class/net/eth1/queues"); !strings.Contains(q, "rx-1") {
		t.Errorf("m's eth1 has queues %q, want two queue pairs on its macvtap", q)
	}

	t.Run("cgroup", func(t *testing.T) {
		// m's two pinned vCPUs reserve half a core each every 20 ms: its QEMU's group has the
		// quota of one core per 20 ms, and its memory is the guest's 512M, QEMU's 128M and the
		// emulator's 128M translation buffer.
		n := inspect(t, e.state, "vmic").node(t, "m")
		groups := procCgroups(t, n.PID)
		want := map[string]string{"cpu.max": "20000 20000", "memory.max": strconv.Itoa(768 << 20)}
		if _, v2 := groups[""]; !v2 {
			want = map[string]string{"cpu.cfs_quota_us": "20000", "cpu.cfs_period_us": "20000", "memory.limit_in_bytes": strconv.Itoa(768 << 20)}
		}
		for file, value := range want {
			if got := cgroupFile(t, groups, file); got != value {
				t.Errorf("QEMU's %s = %q, want %q", file, got, value)
			}
		}
		out := mustTrellis(t, e.state, "inspect", "vmic", "--json")
		var info struct {
			Nodes []struct {
				Name    string
				Notes   []string
				Usage   *struct{ Memory uint64 }
				Threads []struct{ Name, Policy string }
			}
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatal(err)
		}
		for _, nd := range info.Nodes {
			if nd.Name != "m" {
				continue
			}
			if !strings.Contains(strings.Join(nd.Notes, "\n"), "cgroup CPU quota 20ms per 20ms") {
				t.Errorf("inspect does not say the reservation is a quota: %q", nd.Notes)
			}
			if nd.Usage == nil || nd.Usage.Memory < 64<<20 {
				t.Errorf("inspect shows the VM's usage %+v, want its QEMU's memory (at least the booted guest's 64M)", nd.Usage)
			}
			for _, th := range nd.Threads {
				if strings.HasPrefix(th.Name, "CPU ") && th.Policy != "other" {
					t.Errorf("pinned vCPU thread %+v is not SCHED_OTHER under its quota", th)
				}
			}
		}
	})

	t.Run("rate", func(t *testing.T) {
		got := iperfRate(t, e.state, "vmic", "m", "a", "10.0.1.1") / 10e6
		t.Logf("a -> VM over a 10mbit link through a macvtap: %.2f of the rate", got)
		if got > 1.1 || got < 0.5 {
			t.Errorf("a -> VM: %.2f of the 10mbit rate, want at most 1.1 (and at least 0.5 even under emulation)", got)
		}
	})

	t.Run("links removed and added live", func(t *testing.T) {
		pids := map[string]int{}
		for _, vm := range []string{"m", "g"} {
			pids[vm] = inspect(t, e.state, "vmic").node(t, vm).PID
		}
		rewriteTopo(t, path, vmicTopo(true))
		mustTrellis(t, e.state, "up", path)
		for vm, pid := range pids {
			if got := inspect(t, e.state, "vmic").node(t, vm).PID; got != pid {
				t.Errorf("changing a link restarted VM %s (pid %d -> %d)", vm, pid, got)
			}
		}
		if nics := mustExec(t, e.state, "vmic", "g", "ls", "/sys/class/net"); strings.Contains(nics, "eth2") {
			t.Errorf("g still has eth2 after its link went: %q", nics)
		}
		ping(t, e.state, "vmic", "c", "10.0.2.1")
		ping(t, e.state, "vmic", "a", "10.0.4.1")
		if q := mustExec(t, e.state, "vmic", "m", "ls", "/sys/class/net/eth2/queues"); !strings.Contains(q, "rx-1") {
			t.Errorf("m's hot-plugged eth2 has queues %q, want two queue pairs on its macvtap", q)
		}
	})

	mustTrellis(t, e.state, "down", "vmic")
	e.assertClean()
}

// procCgroups returns the control groups of process pid by controller ("" for v2's).
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/trellis/") {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	if len(out) == 0 {
		t.Fatalf("process %d is in no trellis cgroup:\n%s", pid, data)
	}
	return out
}

// cgroupFile reads a file of the group groups holds for its controller (the part of its name
// before the dot), in v2's hierarchy or v1's.
func cgroupFile(t *testing.T, groups map[string]string, file string) string {
	t.Helper()
	path := filepath.Join("/sys/fs/cgroup", groups[""], file)
	if _, v2 := groups[""]; !v2 {
		c, _, _ := strings.Cut(file, ".")
		path = filepath.Join("/sys/fs/cgroup", c, groups[c], file)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
