package measure

import (
	"encoding/binary"
	"net"
	"testing"
)

func TestUDPFrames(t *testing.T) {
	a := FlowAddrs{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: net.IPv4(10, 1, 0, 1), DstIP: net.IPv4(10, 2, 0, 2), SrcPort: 10000, DstPort: 9000}
	for _, size := range []int{64, 128, 1500} {
		frames, err := UDPFrames(a, size, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			if len(f) != size {
				t.Errorf("size %d: frame %d is %d bytes", size, i, len(f))
			}
			if binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 {
				t.Errorf("size %d: not IPv4/UDP", size)
			}
			if ipChecksum(f[14:34]) != 0 {
				t.Errorf("size %d: bad IPv4 header checksum", size)
			}
			if got := binary.BigEndian.Uint16(f[16:]); int(got) != size-14 {
				t.Errorf("size %d: IP length %d", size, got)
			}
			if got := binary.BigEndian.Uint16(f[34:]); got != 10000+uint16(i) {
				t.Errorf("flow %d: source port %d", i, got)
			}
		}
	}
	if _, err := UDPFrames(a, 59, 1); err == nil {
		t.Error("a 59-byte frame was accepted")
	}
}

func TestParsePerfReport(t *testing.T) {
	text := []byte(`# Samples: 2K of event 'cpu-clock:pppH'
#
# Overhead       Samples  Symbol
# ........  ............  ......................
#
    40.00%           400  [k] br_handle_frame
    20.00%           200  [k] pv_native_safe_halt
    20.00%           200  [k] bpf_prog_3b185187f1855c4c_shortbridge
    10.00%           100  [k] __netif_receive_skb_core.constprop.0
    10.00%           100  [.] 0x00000000000cc26e
`)
	syms := parsePerfReport(text)
	if len(syms) != 5 || syms[0].name != "br_handle_frame" || !syms[0].kernel || syms[0].samples != 400 || syms[4].kernel {
		t.Fatalf("parsePerfReport = %+v", syms)
	}
	top, groups, busy := profileRows(syms, 1000, 1000)
	if busy != 800 {
		t.Errorf("busy samples %d, want 800 (idle left out)", busy)
	}
	if top[0].Name != "br_handle_frame" || top[0].Percent != 50 || top[0].NSPerFrame != 400e3 {
		t.Errorf("top row %+v", top[0])
	}
	want := map[string]float64{"Linux bridge": 50, "eBPF programs, tc, redirect": 25, "receive core (backlog, RPS, softirq)": 12.5, "user space": 12.5}
	for _, g := range groups {
		if want[g.Name] != g.Percent {
			t.Errorf("group %s: %v%%, want %v%%", g.Name, g.Percent, want[g.Name])
		}
		delete(want, g.Name)
	}
	if len(want) > 0 {
		t.Errorf("groups missing: %v", want)
	}
	for sym, group := range map[string]string{"br_nf_pre_routing": "bridge netfilter (br_nf_*)", "fdb_find_rcu": "Linux bridge", "ip_forward": "IPv4 and routing",
		"veth_xmit": "veth and namespace crossing", "kmem_cache_free": "skb memory", "tc_run": "eBPF programs, tc, redirect", "something_new": "other kernel"} {
		if got := profileGroup(perfSym{name: sym, kernel: true}); got != group {
			t.Errorf("%s is in group %q, want %q", sym, got, group)
		}
	}
}
