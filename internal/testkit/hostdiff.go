package testkit

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Change is one difference between two snapshots.
type Change struct {
	Op    string // "+" appeared, "-" disappeared
	Kind  string // link, qdisc, netns, bpf, pin, node, group, mount, cgroup
	What  string
	Owner string // OwnOurs, ...
}

func (c Change) String() string { return fmt.Sprintf("%s %-6s %s [%s]", c.Op, c.Kind, c.What, c.Owner) }

// excused says whether a change is not this test's to answer for:
//   - something that appeared is excused only if it is provably someone else's: a link named by
//     another state directory's trellis or a non-host, non-trellis link; a qdisc on such a
//     link; a namespace that no process of this run is in; a node of another state directory;
//     an eBPF program attached to a foreign link or held open only by processes not of this
//     run;
//   - something trellis keeps once made (Owners.Kept) may appear, not go;
//   - something that disappeared is excused unless it is the host's (a host link or a qdisc of
//     one) or unattributed: a test is checked for what it leaves, and what others remove is
//     theirs to remove;
//   - with Owners.Strict, nothing is.
//
// An unattributed change (nothing tells whose it is) is excused outside CI only: on a
// developer machine others may be using it.
func (s *Host) excused(c Change) bool {
	switch {
	case c.Owner == OwnUnattributed:
		return !InCI()
	case s.owners.Strict:
		return false
	case c.Op == "+":
		return c.Owner == OwnForeign || c.Owner == OwnKept
	}
	return c.Owner != OwnHost && c.Owner != OwnKept
}

// Diff compares two snapshots: fail lists the differences that count, excused those that do
// not (excused).
func Diff(before, after *Host) (fail, excused []Change) {
	var all []Change
	add := func(c Change) { all = append(all, c) }
	onlyIn(after.Links, before.Links, func(name, typ string) {
		add(Change{"+", "link", name + " (" + typ + ")", after.linkOwner(name)})
	})
	onlyIn(before.Links, after.Links, func(name, typ string) {
		add(Change{"-", "link", name + " (" + typ + ")", after.linkOwner(name)})
	})
	onlyIn(after.Qdiscs, before.Qdiscs, func(q, link string) { add(Change{"+", "qdisc", q, after.linkOwner(link)}) })
	onlyIn(before.Qdiscs, after.Qdiscs, func(q, link string) { add(Change{"-", "qdisc", q, after.linkOwner(link)}) })
	onlyIn(after.Netns, before.Netns, func(ino uint64, _ []int) {
		add(Change{"+", "netns", after.netnsDesc(ino), after.netnsOwner(ino)})
	})
	onlyIn(before.Netns, after.Netns, func(ino uint64, _ []int) {
		add(Change{"-", "netns", before.netnsDesc(ino), before.netnsOwner(ino)})
	})
	onlyIn(after.Progs, before.Progs, func(id uint32, _ bool) { add(Change{"+", "bpf", after.progWhere(id), after.progOwner(id)}) })
	onlyIn(before.Progs, after.Progs, func(id uint32, _ bool) {
		add(Change{"-", "bpf", fmt.Sprintf("prog %d", id), unknownIf(after)})
	})
	for pid, cmd := range after.Nodes {
		if before.Nodes[pid] != cmd {
			add(Change{"+", "node", fmt.Sprintf("pid %d: %s", pid, cmd), after.nodeOwner(pid)})
		}
	}
	for pid, cmd := range before.Nodes {
		if after.Nodes[pid] != cmd {
			add(Change{"-", "node", fmt.Sprintf("pid %d: %s", pid, cmd), before.nodeOwner(pid)})
		}
	}
	diffStates(before, after, add)
	for _, c := range all {
		if after.excused(c) {
			excused = append(excused, c)
		} else {
			fail = append(fail, c)
		}
	}
	sortChanges(fail)
	sortChanges(excused)
	return fail, excused
}

// unknownIf is the owner of what nothing can be asked about any more (a program gone).
func unknownIf(s *Host) string {
	if !s.attributes() {
		return OwnUnattributed
	}
	return OwnUnknown
}

// diffStates compares the snapshots' files and mounts: groups, pins, mounts, control groups.
func diffStates(before, after *Host, add func(Change)) {
	for path, id := range after.Groups {
		if _, ok := before.Groups[path]; !ok {
			add(Change{"+", "group", path, after.stateOwner(id)})
		}
	}
	for path, id := range before.Groups {
		if _, ok := after.Groups[path]; !ok {
			add(Change{"-", "group", path, before.stateOwner(id)})
		}
	}
	for _, set := range []struct {
		kind          string
		before, after map[string]bool
	}{{"pin", before.Pins, after.Pins}, {"mount", before.Mounts, after.Mounts}, {"cgroup", before.Cgroups, after.Cgroups}} {
		onlyIn(set.after, set.before, func(k string, _ bool) { add(Change{"+", set.kind, k, after.pathOwner(k)}) })
		onlyIn(set.before, set.after, func(k string, _ bool) { add(Change{"-", set.kind, k, after.pathOwner(k)}) })
	}
}

func (s *Host) netnsDesc(ino uint64) string {
	pids := s.Netns[ino]
	sort.Ints(pids)
	var holders []string
	for i, pid := range pids {
		if i == 3 {
			holders = append(holders, fmt.Sprintf("and %d more", len(pids)-3))
			break
		}
		holders = append(holders, fmt.Sprintf("%d (%s)", pid, s.procName(pid)))
	}
	holders = append(holders, s.Held[ino]...)
	return fmt.Sprintf("net:[%d] in use by %s", ino, strings.Join(holders, ", "))
}

func sortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Kind != cs[j].Kind {
			return cs[i].Kind < cs[j].Kind
		}
		return cs[i].What < cs[j].What
	})
}

// FormatChanges lists changes one a line, at most max.
func FormatChanges(cs []Change, max int) string {
	var b strings.Builder
	for i, c := range cs {
		if i == max {
			fmt.Fprintf(&b, "\t... and %d more\n", len(cs)-max)
			break
		}
		fmt.Fprintf(&b, "\t%s\n", c)
	}
	return b.String()
}

// CheckClean waits, up to within (the kernel frees namespaces, links and eBPF programs a little
// after their last reference), until the host is as the snapshot before recorded it but for
// excused changes, and fails the test with every remaining difference otherwise. The excused
// ones are logged.
func CheckClean(t testing.TB, before *Host, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		after, err := Snapshot()
		if err != nil {
			if time.Now().After(deadline) {
				t.Errorf("host snapshot: %v", err)
				return
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		fail, excused := Diff(before, after)
		if len(fail) == 0 {
			if len(excused) > 0 {
				t.Logf("host clean; ignored %d changes by others on this machine (or not attributed outside CI: %s=1 fails on those):\n%s",
					len(excused), CIEnv, FormatChanges(excused, 10))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the host is not as it was before the test, %v later; %d differences:\n%s(ignored as others': %d)",
				within, len(fail), FormatChanges(fail, 200), len(excused))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// CheckSame fails unless two snapshots are the same but for excused changes, at once.
func CheckSame(t testing.TB, a, b *Host) {
	t.Helper()
	fail, excused := Diff(a, b)
	if len(fail) > 0 {
		t.Errorf("the host changed; %d differences:\n%s(ignored as others': %d)", len(fail), FormatChanges(fail, 200), len(excused))
	}
}

// OursCount counts what of this run a snapshot holds, by kind, to check that the snapshot sees.
func (s *Host) OursCount() map[string]int {
	n := map[string]int{}
	for name := range s.Links {
		if s.linkOwner(name) == OwnOurs {
			n["link"]++
		}
	}
	for _, link := range s.Qdiscs {
		if s.linkOwner(link) == OwnOurs {
			n["qdisc"]++
		}
	}
	for ino, pids := range s.Netns {
		switch {
		case s.netnsOwner(ino) != OwnOurs || ino == rootNetns():
		case len(pids) > 0:
			n["netns"]++
		default:
			n["netns held"]++ // by a mount (a port namespace) or a descriptor
		}
	}
	for id := range s.Progs {
		if s.progOwner(id) == OwnOurs {
			n["bpf"]++
		}
	}
	for pid := range s.Nodes {
		if s.nodeOwner(pid) == OwnOurs {
			n["node"]++
		}
	}
	return n
}

// rootNetns returns the inode of the test's own (the root) network namespace.
func rootNetns() uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &st); err != nil {
		return 0
	}
	return st.Ino
}

// onlyIn calls f for each entry of a whose key b lacks.
func onlyIn[K comparable, V any](a, b map[K]V, f func(K, V)) {
	for k, v := range a {
		if _, ok := b[k]; !ok {
			f(k, v)
		}
	}
}
