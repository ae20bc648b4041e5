package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeTB records how a test ended: Skip and Fatal stop it as testing's do (runtime.Goexit
// there, a panic here that run recovers).
type fakeTB struct {
	testing.TB
	name    string
	skipped string
	fatal   string
}

type stopped struct{}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	panic(stopped{})
}
func (f *fakeTB) Skipf(format string, args ...any) { f.Skip(fmt.Sprintf(format, args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func run(name string, body func(t testing.TB)) (f *fakeTB) {
	f = &fakeTB{name: name}
	defer func() {
		if r := recover(); r != nil && r != (stopped{}) {
			panic(r)
		}
	}()
	body(f)
	return f
}

// useAllowList points the kit at an allow-list with text, for this test only.
func useAllowList(t *testing.T, text string) {
	path := filepath.Join(t.TempDir(), "allowed.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	old := allowListFile
	allowListFile = path
	allowed.once = sync.Once{}
	t.Cleanup(func() { allowListFile = old; allowed.once = sync.Once{} })
}

// TestSkipOrFail: outside CI a missing tool skips, naming it and how to install it; in CI it
// fails, unless the test is on the allow-list, whose reason the skip then gives.
func TestSkipOrFail(t *testing.T) {
	useAllowList(t, "# comment\nTestListed  CI has no such thing\n")
	need := func(t testing.TB) { RequireTool(t, "trellis-no-such-tool", "apt-get install trellis-no-such-tool") }
	for _, c := range []struct {
		ci, name       string
		skipped, fatal string // substrings; "" = none
	}{
		{"", "TestAny", "trellis-no-such-tool is not installed", ""},
		{"0", "TestAny", "apt-get install trellis-no-such-tool", ""},
		{"1", "TestAny", "", "TestAny is not in test/skips-allowed-in-ci.txt"},
		{"1", "TestListed", "allowed in CI: CI has no such thing", ""},
		{"1", "TestListed/case", "", "apt-get install trellis-no-such-tool"},
	} {
		t.Run(c.ci+c.name, func(t *testing.T) {
			t.Setenv(CIEnv, c.ci)
			f := run(c.name, need)
			if !strings.Contains(f.skipped, c.skipped) || (c.skipped == "") != (f.skipped == "") {
				t.Errorf("skipped %q, want it to hold %q", f.skipped, c.skipped)
			}
			if !strings.Contains(f.fatal, c.fatal) || (c.fatal == "") != (f.fatal == "") {
				t.Errorf("failed %q, want it to hold %q", f.fatal, c.fatal)
			}
		})
	}
}

// TestSkipWithBadAllowList: in CI an allow-list that does not parse fails every skip, naming
// the line.
func TestSkipWithBadAllowList(t *testing.T) {
	useAllowList(t, "TestListed\n")
	t.Setenv(CIEnv, "1")
	f := run("TestListed", func(t testing.TB) { Skip(t, "nothing here") })
	if f.skipped != "" || !strings.Contains(f.fatal, "allowed.txt:1: TestListed has no reason") {
		t.Errorf("skipped %q, failed %q; want a failure naming line 1", f.skipped, f.fatal)
	}
}

func TestRequireNothingMissing(t *testing.T) {
	t.Setenv(CIEnv, "1")
	f := run("TestAny", func(t testing.TB) {
		RequireTool(t, "sh", "")
		RequireKernel(t, Feature{Name: "anything", Since: "Linux 1.0", Has: func() bool { return true }})
		RequireFile(t, "/", "")
	})
	if f.skipped != "" || f.fatal != "" {
		t.Errorf("skipped %q, failed %q; want neither", f.skipped, f.fatal)
	}
	f = run("TestAny", func(t testing.TB) {
		RequireKernel(t, Feature{Name: "tcx", Since: "Linux 6.6", Has: func() bool { return false }})
	})
	if !strings.Contains(f.fatal, "has no tcx: it needs Linux 6.6 or later") {
		t.Errorf("failed %q; want the feature and its kernel named", f.fatal)
	}
}

func TestParseAllowList(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       map[string]string
		err        string
	}{
		{"empty", "\n# only comments\n", map[string]string{}, ""},
		{"tab and spaces", "TestA\tneeds 32769 nodes\nTestB/case   opt-in soak  \n",
			map[string]string{"TestA": "needs 32769 nodes", "TestB/case": "opt-in soak"}, ""},
		{"no reason", "TestA\n", nil, "f:1: TestA has no reason"},
		{"not a test", "\nBenchmarkA why\n", nil, `f:2: "BenchmarkA" is not a test's name`},
		{"twice", "TestA one\nTestA two\n", nil, "f:2: TestA is listed already on line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAllowList("f", strings.NewReader(c.text))
			if c.err != "" {
				if !errors.Is(err, ErrAllowList) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want ErrAllowList with %q", err, c.err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// TestAllowListIsTrue: the committed allow-list parses, and names only tests that exist.
func TestAllowListIsTrue(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	list, err := ReadAllowList(filepath.Join(root, AllowListPath))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		for _, m := range funcRE.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range list {
		top, _, _ := strings.Cut(name, "/")
		if !defined[top] {
			t.Errorf("%s names %s, but no test function %s exists: remove its line", AllowListPath, name, top)
		}
	}
}

// host is a snapshot with links and mounts, attributed with owners o.
func host(o Owners, links map[string]string, mounts ...string) *Host {
	h := &Host{Links: links, Mounts: map[string]bool{}, owners: o}
	for _, m := range mounts {
		h.Mounts[m] = true
	}
	return h
}

// TestDiff: a difference fails unless it is provably someone else's (with Owners), or nothing
// tells whose it is outside CI; Strict excuses nothing.
func TestDiff(t *testing.T) {
	const ours, theirs = "0a0b0c", "0d0e0f"
	attributed := Owners{IDs: func() (map[string]bool, map[string]bool) { return nil, nil }, HostLinks: map[string]bool{"eth0": true},
		stateIDs: map[string]bool{"s1": true}, netIDs: map[string]bool{ours: true}}
	strict := attributed
	strict.Strict = true
	before := map[string]string{"lo": "device", "eth0": "device", "veth9": "veth"}
	after := map[string]string{"lo": "device", "tr" + ours + "p1": "veth", "tr" + theirs + "p1": "veth"}
	for _, c := range []struct {
		name          string
		o             Owners
		ci            bool
		fail, excused []string
	}{
		{"no owners, CI", Owners{}, true, []string{
			"- link   eth0 (device) [unattributed]", "- link   veth9 (veth) [unattributed]", "+ link   tr0a0b0cp1 (veth) [unattributed]",
			"+ link   tr0d0e0fp1 (veth) [unattributed]", "- mount  /tmp/a (tmpfs) [unattributed]"}, nil},
		{"no owners, developer machine", Owners{}, false, nil, []string{
			"- link   eth0 (device) [unattributed]", "- link   veth9 (veth) [unattributed]", "+ link   tr0a0b0cp1 (veth) [unattributed]",
			"+ link   tr0d0e0fp1 (veth) [unattributed]", "- mount  /tmp/a (tmpfs) [unattributed]"}},
		{"owners", attributed, false, []string{"- link   eth0 (device) [host]", "+ link   tr0a0b0cp1 (veth) [ours]"},
			[]string{"- link   veth9 (veth) [foreign]", "+ link   tr0d0e0fp1 (veth) [foreign]", "- mount  /tmp/a (tmpfs) [unattributed]"}},
		{"owners, CI", attributed, true, []string{"- link   eth0 (device) [host]", "+ link   tr0a0b0cp1 (veth) [ours]", "- mount  /tmp/a (tmpfs) [unattributed]"},
			[]string{"- link   veth9 (veth) [foreign]", "+ link   tr0d0e0fp1 (veth) [foreign]"}},
		{"strict", strict, false, []string{"- link   eth0 (device) [host]", "- link   veth9 (veth) [foreign]", "+ link   tr0a0b0cp1 (veth) [ours]", "+ link   tr0d0e0fp1 (veth) [foreign]"},
			[]string{"- mount  /tmp/a (tmpfs) [unattributed]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ci := "0"
			if c.ci {
				ci = "1"
			}
			t.Setenv(CIEnv, ci)
			fail, excused := Diff(host(c.o, before, "/tmp/a (tmpfs)"), host(c.o, after))
			sortWhat(c.fail)
			sortWhat(c.excused)
			if got, want := strings.Join(str(fail), "\n"), strings.Join(c.fail, "\n"); got != want {
				t.Errorf("fail\n%s\nwant\n%s", got, want)
			}
			if got, want := strings.Join(str(excused), "\n"), strings.Join(c.excused, "\n"); got != want {
				t.Errorf("excused\n%s\nwant\n%s", got, want)
			}
		})
	}
	if fail, excused := Diff(host(Owners{}, after), host(Owners{}, after)); len(fail)+len(excused) != 0 {
		t.Errorf("Diff of a host with itself = %v, %v", fail, excused)
	}
}

// sortWhat sorts changes as Diff does, by kind and then what ("+ link   NAME ...").
func sortWhat(lines []string) {
	slices.SortFunc(lines, func(a, b string) int {
		fa, fb := strings.Fields(a), strings.Fields(b)
		return strings.Compare(fa[1]+" "+fa[2], fb[1]+" "+fb[2])
	})
}

func str(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

// TestSnapshotSeesLinksAndMounts: a veth pair made, a tmpfs mounted and a network namespace
// held by a descriptor between two snapshots show up in their difference.
func TestSnapshotSeesLinksAndMounts(t *testing.T) {
	RequireRoot(t)
	before, err := Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("trkit%d", os.Getpid()%100000)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(veth)
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, 0)
	after, err := Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(CIEnv, "1")
	fail, _ := Diff(before, after)
	diff := strings.Join(str(fail), "\n")
	for _, want := range []string{"+ link   " + name + " (veth)", "+ link   " + name + "p (veth)", "+ mount  " + dir + " (tmpfs)"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff %q lacks %q", diff, want)
		}
	}
}

// TestDiffKept: what trellis keeps once made (the control groups' parent) may appear, not go;
// a control group not attributed fails in CI.
func TestDiffKept(t *testing.T) {
	t.Setenv(CIEnv, "1")
	o := Owners{IDs: func() (map[string]bool, map[string]bool) { return nil, nil },
		Kept: func(path string) bool { return filepath.Base(path) == "trellis" }}
	groups := func(paths ...string) *Host {
		h := &Host{Cgroups: map[string]bool{}, owners: o}
		for _, p := range paths {
			h.Cgroups[p] = true
		}
		return h
	}
	fail, excused := Diff(groups("/sys/fs/cgroup/a"), groups("/sys/fs/cgroup/a", "/sys/fs/cgroup/trellis", "/sys/fs/cgroup/b"))
	if got := fmt.Sprint(str(fail), str(excused)); got != "[+ cgroup /sys/fs/cgroup/b [unattributed]] [+ cgroup /sys/fs/cgroup/trellis [kept]]" {
		t.Errorf("appeared: %s", got)
	}
	if fail, _ := Diff(groups("/sys/fs/cgroup/trellis"), groups()); fmt.Sprint(str(fail)) != "[- cgroup /sys/fs/cgroup/trellis [kept]]" {
		t.Errorf("gone: fail %v", str(fail))
	}
}
