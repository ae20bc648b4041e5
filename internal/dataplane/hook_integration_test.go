//go:build integration

package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
	"golang.org/x/sys/unix"
)

// tcx is the kernel feature of the tests of the tcx hook.
var tcx = testkit.Feature{Name: "tcx", Since: "Linux 6.6", Has: kernelHasTCX}

// testHooks returns the hooks this kernel offers: tcx (where it has it) and clsact.
func testHooks(t *testing.T) []Hook {
	t.Helper()
	if !kernelHasTCX() {
		t.Log("this kernel has no tcx: testing the clsact hook only")
		return []Hook{HookClsact}
	}
	return []Hook{HookTCX, HookClsact}
}

// cfg is the Config the tests of this package attach with: the default hook (clsact) unless
// useHook chose another.
var cfg Config

// useHook makes the tests attach on h until the test ends. Tests of this package do not run in
// parallel.
func useHook(t *testing.T, h Hook) {
	t.Helper()
	old := cfg
	cfg.PortHook = string(h)
	t.Cleanup(func() { cfg = old })
}

// TestPortHookDetected: the probe finds tcx on a kernel that has it (6.6 or later), and
// "auto" then chooses it.
func TestPortHookDetected(t *testing.T) {
	testkit.RequireRoot(t)
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &major, &minor)
	newEnough := major > 6 || major == 6 && minor >= 6
	if probeTCX() != newEnough {
		t.Errorf("kernel %d.%d: probeTCX() = %v", major, minor, probeTCX())
	}
	want := HookClsact
	if newEnough {
		want = HookTCX
	}
	if h, err := chooseHook("auto", probeTCX()); err != nil || h != want {
		t.Errorf("auto on kernel %d.%d: %s, %v; want %s", major, minor, h, err, want)
	}
}

// TestImpairOrderTCX checks on tcx that an impairment added, changed and removed live, whether
// attached before or after the shortbridge, and across a re-target of the shortbridge to
// another peer mode, runs in front of it: 100% loss stops every frame, and the tcx list reads
// impair then shortbridge.
func TestImpairOrderTCX(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireKernel(t, tcx)
	useHook(t, HookTCX)
	l := setupTestLink(t)
	want := "tcx:" + impairProgName + " tcx:" + shortbridgeProgName
	blocked := func(what string, wantBlocked bool) {
		t.Helper()
		err := icmpEcho(l.a, l.b.addr, 700*time.Millisecond)
		if wantBlocked && err == nil {
			t.Fatalf("%s: a ping crossed a port losing every frame: the impairment did not run first", what)
		}
		if !wantBlocked && err != nil {
			t.Fatalf("%s: ping A->B: %v", what, err)
		}
	}
	// The impairment first, the shortbridge after: the shortbridge goes behind it.
	impairA(t, l, Impairment{Loss: 100})
	for _, p := range [][2]*testNode{{l.a, l.b}, {l.b, l.a}} {
		if err := AttachShortbridge(cfg, p[0].port, p[1].port, true); err != nil {
			t.Fatal(err)
		}
	}
	if layout, _ := ingressLayout(t, l.a.port); layout != want {
		t.Fatalf("port A: %s, want %s", layout, want)
	}
	blocked("impairment attached first", true)
	impairA(t, l, Impairment{Loss: 0, Duplicate: 1})
	blocked("loss changed live to 0", false)
	impairA(t, l, Impairment{Loss: 100})
	blocked("loss changed live to 100", true)

	// Re-targeted (another delivery mode, so a new program) in its place behind the impairment.
	_, ids := ingressLayout(t, l.a.port)
	if err := AttachShortbridge(cfg, l.a.port, l.b.port, false); err != nil {
		t.Fatal(err)
	}
	layout, ids2 := ingressLayout(t, l.a.port)
	if layout != want || ids2["tcx:"+shortbridgeProgName] == ids["tcx:"+shortbridgeProgName] {
		t.Fatalf("after the re-target: %s (shortbridge %d -> %d), want %s with a new shortbridge", layout,
			ids["tcx:"+shortbridgeProgName], ids2["tcx:"+shortbridgeProgName], want)
	}
	l.progIDs = append(l.progIDs, ids["tcx:"+shortbridgeProgName], ids2["tcx:"+shortbridgeProgName])
	blocked("after the re-target", true)

	// Removed live: only the shortbridge is left, and frames cross.
	impairA(t, l, Impairment{})
	if layout, _ := ingressLayout(t, l.a.port); layout != "tcx:"+shortbridgeProgName {
		t.Fatalf("after removing the impairment: %s, want the shortbridge alone", layout)
	}
	blocked("impairment removed", false)

	// The shortbridge first, the impairment after: the impairment goes in front.
	impairA(t, l, Impairment{Loss: 100})
	if layout, _ := ingressLayout(t, l.a.port); layout != want {
		t.Fatalf("impairment added to a shortbridge port: %s, want %s", layout, want)
	}
	blocked("impairment attached second", true)
	if err := SetImpairment(cfg, l.a.port, Impairment{}); err != nil {
		t.Fatal(err)
	}
}

// TestForwardingAcrossHooks re-targets a port's forwarding live between the shortbridge on
// tcx, the shortbridge under clsact, the LAN connector (clsact) and nothing, and checks after
// each step that the port has exactly the one forwarding program expected and that frames
// cross (or, detached, do not).
func TestForwardingAcrossHooks(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireKernel(t, tcx)
	l := setupTestLink(t)
	sbTCX, sbCls := "tcx:"+shortbridgeProgName, shortbridgeFilterName+"@2"
	steps := []struct {
		name   string
		do     func(port, peer int) error
		layout string
	}{
		{"shortbridge on tcx", func(p, q int) error { return AttachShortbridgeOn(HookTCX, p, q, true) }, sbTCX},
		{"shortbridge under clsact", func(p, q int) error { return AttachShortbridgeOn(HookClsact, p, q, true) }, sbCls},
		{"back to tcx", func(p, q int) error { return AttachShortbridgeOn(HookTCX, p, q, false) }, sbTCX},
		{"LAN", nil, lanFilterName + "@2"},
		{"shortbridge after the LAN", func(p, q int) error { return AttachShortbridgeOn(HookTCX, p, q, true) }, sbTCX},
		{"detached", func(p, _ int) error { return DetachForwarding(p) }, ""},
		{"detached twice", func(p, _ int) error { return DetachForwarding(p) }, ""},
	}
	for _, s := range steps {
		if s.do == nil {
			err := AttachLAN([]LANMember{{Ifindex: l.a.port, Peer: true}, {Ifindex: l.b.port, Peer: true}}, LANOptions{})
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		for _, p := range [][2]*testNode{{l.a, l.b}, {l.b, l.a}} {
			if s.do != nil {
				if err := s.do(p[0].port, p[1].port); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
			}
			layout, ids := ingressLayout(t, p[0].port)
			if layout != s.layout {
				t.Fatalf("%s: port %s: %s, want %s", s.name, p[0].portName, layout, s.layout)
			}
			for _, id := range ids {
				l.progIDs = append(l.progIDs, id)
			}
			attached, err := ShortbridgeAttached(p[0].port)
			if wantSB := s.layout == sbTCX || s.layout == sbCls; err != nil || attached != wantSB {
				t.Fatalf("%s: ShortbridgeAttached(%s) = %v, %v; want %v", s.name, p[0].portName, attached, err, wantSB)
			}
		}
		err := icmpEcho(l.a, l.b.addr, time.Second)
		switch {
		case s.layout != "" && err != nil:
			t.Fatalf("%s: ping A->B: %v", s.name, err)
		case s.layout == "" && err == nil:
			t.Fatalf("%s: a ping crossed ports without a forwarding program", s.name)
		}
		if s.layout != "" {
			if err := sendRawFrame(l.b, l.a); err != nil {
				t.Fatalf("%s: non-IP frame B->A: %v", s.name, err)
			}
		}
	}
}

// TestPortHookFollowsPort: a program added to a port goes where the port's others are when the
// process's hook differs (one `trellis up --port-hook tcx`, a later `link set` without it), so
// that the impairment still runs in front of the forwarding: tcx runs before every clsact
// filter, and a shortbridge on tcx would otherwise pass frames before a clsact impairment saw
// them (and the reverse). 100% loss must stop every frame.
func TestPortHookFollowsPort(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireKernel(t, tcx)
	blocked := func(l *testLink, what string) {
		t.Helper()
		if err := icmpEcho(l.a, l.b.addr, 700*time.Millisecond); err == nil {
			t.Fatalf("%s: a ping crossed a port losing every frame: the impairment did not run first", what)
		}
	}
	clsact, tcxCfg := Config{PortHook: string(HookClsact)}, Config{PortHook: string(HookTCX)}
	for _, c := range []struct {
		name           string
		sb, im, resb   Config // the shortbridges', the impairment's, the re-target's
		want, wantResb string
	}{
		{"shortbridge on tcx, impairment asked under clsact", tcxCfg, clsact, clsact,
			"tcx:" + impairProgName + " tcx:" + shortbridgeProgName, "tcx:" + impairProgName + " tcx:" + shortbridgeProgName},
		{"impairment under clsact, shortbridge re-targeted on tcx", clsact, clsact, tcxCfg,
			impairFilterName + "@1 " + shortbridgeFilterName + "@2", impairFilterName + "@1 " + shortbridgeFilterName + "@2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := setupTestLink(t)
			for _, p := range [][2]*testNode{{l.a, l.b}, {l.b, l.a}} {
				if err := AttachShortbridge(c.sb, p[0].port, p[1].port, true); err != nil {
					t.Fatal(err)
				}
			}
			if err := SetImpairment(c.im, l.a.port, Impairment{Loss: 100}); err != nil {
				t.Fatal(err)
			}
			layout, ids := ingressLayout(t, l.a.port)
			for _, id := range ids {
				l.progIDs = append(l.progIDs, id)
			}
			if layout != c.want {
				t.Fatalf("port A: %s, want %s", layout, c.want)
			}
			blocked(l, "impairment added")
			if err := AttachShortbridge(c.resb, l.a.port, l.b.port, false); err != nil {
				t.Fatal(err)
			}
			layout, ids = ingressLayout(t, l.a.port)
			for _, id := range ids {
				l.progIDs = append(l.progIDs, id)
			}
			if layout != c.wantResb {
				t.Fatalf("port A after the re-target: %s, want %s", layout, c.wantResb)
			}
			blocked(l, "shortbridge re-targeted")
			if err := SetImpairment(c.im, l.a.port, Impairment{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
