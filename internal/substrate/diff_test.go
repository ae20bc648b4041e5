package substrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

const diffBase = `name: d
nodes:
  a:
    addresses: {eth1: [10.0.0.1/24]}
  b:
    addresses: {eth1: [10.0.0.2/24], eth2: [10.0.1.2/24]}
  c:
    addresses: {eth1: [10.0.1.3/24]}
links:
  - endpoints: [a:eth1, b:eth1]
  - endpoints: [b:eth2, c:eth1]
    rate: 10mbit
`

func diffPlan(t *testing.T, doc string, names *plan.Names) *plan.Plan {
	t.Helper()
	n, err := spec.Parse("d.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(n, "scope", "", names)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiff: what each edit of a file changes, as diff and live up say it, and whether the
// change only sets links' settings in place.
func TestDiff(t *testing.T) {
	root := t.TempDir()
	for _, d := range spec.RootfsDirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		edit     func(string) string
		want     []string
		settings bool
	}{
		{"nothing", func(s string) string { return s }, nil, true},
		{"reordered links", func(s string) string {
			i := strings.Index(s, "  - endpoints: [b:eth2")
			return s[:strings.Index(s, "  - endpoints: [a:eth1")] + s[i:] + "  - endpoints: [a:eth1, b:eth1]\n"
		}, nil, true},
		{"rate", func(s string) string { return strings.Replace(s, "rate: 10mbit", "rate: 20mbit", 1) },
			[]string{"~ link b:eth2--c:eth1: rate 10mbit -> 20mbit"}, true},
		{"rate removed, connector shortbridge", func(s string) string {
			return strings.Replace(s, "    rate: 10mbit\n", "    connector: shortbridge\n", 1)
		},
			// a connector named keeps its ports
			[]string{"~ link b:eth2--c:eth1: rate 10mbit -> none"}, true},
		{"rate removed", func(s string) string { return strings.Replace(s, "    rate: 10mbit\n", "", 1) },
			// nothing to enforce any more: the link loses its ports
			[]string{"~ link b:eth2--c:eth1: connector shortbridge -> veth (b:eth2, c:eth1 to one veth pair " + Replugged + "; " + KeepPorts + "); rate 10mbit -> none"}, false},
		{"loss one way", func(s string) string { return s + "    from: {b:eth2: {loss: 5% 25%}}\n" },
			[]string{"~ link b:eth2--c:eth1: impairment from b:eth2 none -> loss 5%, correlation 25%"}, true},
		{"state", func(s string) string { return s + "    state: down\n" },
			[]string{"~ link b:eth2--c:eth1: state up -> down"}, true},
		{"address of a link interface", func(s string) string { return strings.Replace(s, "10.0.1.3/24", "10.0.1.33/24", 1) },
			// not settings only: the record names the target, whose addresses are trellis's
			// if the change is interrupted
			[]string{"~ link b:eth2--c:eth1: addresses of c:eth1 [10.0.1.3/24] -> [10.0.1.33/24]"}, false},
		// live: both ends are containers, whose interfaces change MTU in place
		{"mtu", func(s string) string { return s + "    mtu: 1400\n" },
			[]string{"~ link b:eth2--c:eth1: mtu default -> 1400"}, false},
		{"connector", func(s string) string { return s + "    connector: bridge\n" },
			[]string{"~ link b:eth2--c:eth1: connector shortbridge -> bridge"}, false},
		{"lan with table settings", func(s string) string { return s + "    connector: lan\n    table: 64\n    ageing: 30s\n" },
			[]string{"~ link b:eth2--c:eth1: connector shortbridge -> lan; table default -> 64; ageing default -> 30s"}, false},
		{"node added with a link", func(s string) string {
			return strings.Replace(s, "links:\n", "  e:\nlinks:\n", 1) + "  - endpoints: [c:eth2, e:eth1]\n"
		}, []string{"+ node e", "+ link c:eth2--e:eth1"}, false},
		{"node removed with its link", func(s string) string {
			s = strings.Replace(s, "  c:\n    addresses: {eth1: [10.0.1.3/24]}\n", "", 1)
			s = strings.Replace(s, ", eth2: [10.0.1.2/24]", "", 1)
			return s[:strings.Index(s, "  - endpoints: [b:eth2")]
		}, []string{"- node c", "- link b:eth2--c:eth1"}, false},
		{"a node's sysctl restarts it", func(s string) string {
			return strings.Replace(s, "  c:\n", "  c:\n    sysctl: {net.ipv4.ip_forward: 0}\n", 1)
		}, []string{"! node c (restarts): sysctl changed"}, false},
		{"a node's rootfs restarts it", func(s string) string {
			return strings.Replace(s, "  c:\n", "  c:\n    rootfs: "+root+"\n", 1)
		}, []string{"! node c (restarts): rootfs changed"}, false},
		{"a node's loopback restarts it", func(s string) string {
			return strings.Replace(s, "{eth1: [10.0.0.1/24]}", "{eth1: [10.0.0.1/24], lo: [10.255.0.1/32]}", 1)
		}, []string{"! node a (restarts): loopback addresses changed"}, false},
		{"LAN member added", func(s string) string {
			return strings.Replace(strings.Replace(s, "[b:eth2, c:eth1]", "[b:eth2, c:eth1, a:eth2]\n    name: lan", 1),
				"{eth1: [10.0.0.1/24]}", "{eth1: [10.0.0.1/24], eth2: [10.0.1.1/24]}", 1)
		}, []string{"+ link lan", "- link b:eth2--c:eth1"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			names := &plan.Names{}
			old := diffPlan(t, diffBase, names)
			p := diffPlan(t, c.edit(diffBase), names.Clone())
			got := Diff(old, p, nil)
			var lines []string
			for _, ch := range got {
				lines = append(lines, ch.String())
			}
			if strings.Join(lines, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(c.want, "\n"))
			}
			if settingsOnly(got) != c.settings {
				t.Errorf("settingsOnly = %v, want %v", !c.settings, c.settings)
			}
		})
	}
}

// A link's MTU changes in place at a container's end; a VM's NIC (no kinds.MTUSetter) is
// plugged anew, and diff says so for that end alone.
func TestDiffMTUOfVM(t *testing.T) {
	names := &plan.Names{}
	base := strings.Replace(diffBase, "  c:\n", "  c:\n    kind: vm\n", 1)
	old := diffPlan(t, base, names)
	p := diffPlan(t, base+"    mtu: 1400\n", names.Clone())
	var lines []string
	for _, ch := range Diff(old, p, nil) {
		lines = append(lines, ch.String())
	}
	want := "~ link b:eth2--c:eth1: mtu default -> 1400 (c:eth1 " + Recreated + ")"
	if strings.Join(lines, "\n") != want {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), want)
	}
}

// A node that should run and does not is started again; one that runs with other settings
// than the record says restarts.
func TestDiffRunning(t *testing.T) {
	names := &plan.Names{}
	p := diffPlan(t, diffBase, names)
	running := map[string]string{"a": p.Node("a").Digest, "b": "other"}
	var lines []string
	for _, ch := range Diff(p, p, running) {
		lines = append(lines, ch.String())
	}
	want := "! node b (restarts): its settings changed\n! node c (restarts): it is not running"
	if strings.Join(lines, "\n") != want {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), want)
	}
	if d := Diff(nil, p, nil); len(d) != 5 {
		t.Errorf("diff from nothing: %v, want 3 nodes and 2 links added", d)
	}
}
