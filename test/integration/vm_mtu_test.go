//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

// vmMTU changes the MTU of vmnet's link b:eth1--v:eth2 to 9000: diff names the VM's end as
// made anew (its virtio NIC is plugged again, with the new MTU as its ceiling), the VM keeps
// running, b's interface (a container's) keeps its ifindex, both get MTU 9000 and a 9000-byte
// packet crosses whole.
func vmMTU(t *testing.T, state, path string) {
	pid := vmPID(t, state)
	index := func() string {
		i, _, _ := strings.Cut(mustExec(t, state, "vmnet", "b", "ip", "-o", "link", "show", "eth1"), ":")
		return i
	}
	before := index()
	link := "  - endpoints: [v:eth2, b:eth1]\n"
	rewriteTopo(t, path, strings.Replace(vmTopo(true), link, link+"    mtu: 9000\n", 1))
	want := "~ link b:eth1--v:eth2: mtu default -> 9000 (v:eth2 made anew: addresses and routes their nodes' software set on them go)\n"
	if diff := mustTrellis(t, state, "diff", path); !strings.Contains(diff, want) {
		t.Errorf("diff says:\n%s\nwant %q", diff, want)
	}
	mustTrellis(t, state, "up", path)
	if got := vmPID(t, state); got != pid {
		t.Errorf("the MTU change restarted the VM (pid %d -> %d)", pid, got)
	}
	if got := index(); got != before {
		t.Errorf("b's eth1 has ifindex %s, was %s: a container's interface must change MTU in place", got, before)
	}
	for node, ifname := range map[string]string{"v": "eth2", "b": "eth1"} {
		if got := strings.TrimSpace(mustExec(t, state, "vmnet", node, "cat", "/sys/class/net/"+ifname+"/mtu")); got != "9000" {
			t.Errorf("%s's %s has MTU %s, want 9000", node, ifname, got)
		}
	}
	pingEventually(t, state, "vmnet", "b", "10.0.2.1")
	mustExec(t, state, "vmnet", "b", "ping", "-c", "1", "-W", "5", "-M", "do", "-s", "8972", "10.0.2.1")
	// The NIC is plugged once: its tap has the link's MTU, and `up` again leaves it alone.
	tap := func() netlink.Link {
		for _, ep := range inspect(t, state, "vmnet").link(t, "b:eth1--v:eth2").Endpoints {
			if ep.Node == "v" {
				dev, err := netlink.LinkByName(ep.Port)
				if err != nil {
					t.Fatalf("v's port %s: %v", ep.Port, err)
				}
				return dev
			}
		}
		t.Fatal("inspect shows no port of v on b:eth1--v:eth2")
		return nil
	}
	first := tap()
	mustTrellis(t, state, "up", path)
	if again := tap(); first.Attrs().MTU != 9000 || again.Attrs().Index != first.Attrs().Index {
		t.Errorf("v's port %s: MTU %d, ifindex %d, then %d after up again; want 9000 and the same tap", first.Attrs().Name, first.Attrs().MTU, first.Attrs().Index, again.Attrs().Index)
	}
}
