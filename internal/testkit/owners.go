package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
)

// Other people may use the machine a test runs on (other trellis state directories, other
// tests that make veths, namespaces and eBPF programs). A test suite that can tell what of the
// host its own trellis made (SetOwners: the integration suite) has each difference attributed
// to an owner, and what is provably someone else's is excused (Diff gives the rules).

// Owners of what a snapshot holds.
const (
	OwnOurs    = "ours"    // made by this test run
	OwnForeign = "foreign" // provably someone else's
	OwnHost    = "host"    // the machine's own (Owners.HostLinks)
	OwnKept    = "kept"    // trellis's, kept once made (Owners.Kept): it may appear, not go
	OwnUnknown = "unknown" // no owner found where one can be told
	// OwnUnattributed: nothing tells whose it is (a mount, a top control group; anything
	// when no Owners are set). It fails a test in CI, where one test runs at a time, and is
	// logged elsewhere.
	OwnUnattributed = "unattributed"
)

// Owners is what tells this test run's leftovers from others'.
type Owners struct {
	// IDs returns the ids of the run's state directories and of their networks (plan.NetID),
	// as they are when a snapshot is taken.
	IDs func() (stateIDs, netIDs map[string]bool)
	// HostLinks are the machine's own links (present when the run started, not named by
	// trellis, not veths): their disappearance, or a change of their qdiscs, always fails.
	HostLinks map[string]bool
	// UIDRegistry is the uid range registry's directory (state.UIDRegistryDir), whose
	// entries the snapshots list.
	UIDRegistry string
	// Kept says whether a path is trellis's own that it keeps once made, whoever made it
	// first: the control groups' parent in each hierarchy (cgroup.Parent).
	Kept func(path string) bool
	// Strict excuses nothing (the suite's TRELLIS_IT_STRICT=1).
	Strict bool

	stateIDs, netIDs map[string]bool
}

var owners struct {
	sync.Mutex
	o  Owners
	ok bool
}

// SetOwners says, for the whole test binary, how to tell its leftovers from others'.
func SetOwners(o Owners) {
	owners.Lock()
	defer owners.Unlock()
	owners.o, owners.ok = o, true
}

// currentOwners returns the Owners set, with the ids as they are now; the zero Owners if none.
func currentOwners() Owners {
	owners.Lock()
	defer owners.Unlock()
	o := owners.o
	if owners.ok && o.IDs != nil {
		o.stateIDs, o.netIDs = o.IDs()
	}
	return o
}

// attributes says whether the snapshot can tell owners (SetOwners was called).
func (s *Host) attributes() bool { return s.owners.IDs != nil }

// stateOwner tells whose a group or /etc copy of state directory id is.
func (s *Host) stateOwner(id string) string {
	switch {
	case !s.attributes():
		return OwnUnattributed
	case s.owners.stateIDs[id]:
		return OwnOurs
	}
	return OwnForeign
}

// procOurs tells whether a process belongs to this test run: it is the test process or one of
// its descendants, a node of one of this run's state directories, or a process inside one.
func (s *Host) procOurs(pid int) bool {
	self := os.Getpid()
	var walk []*Process
	result := false
	for depth := 0; depth < 64; depth++ {
		if pid == self {
			result = true
			break
		}
		p := s.procs[pid]
		if p == nil || pid <= 1 {
			break
		}
		if p.ours != 0 {
			result = p.ours > 0
			break
		}
		walk = append(walk, p)
		if len(p.Cmdline) > 1 && (p.Cmdline[0] == "trellis-node" || p.Cmdline[0] == "trellis-engines" || p.Cmdline[0] == "trellis-delayline" || p.Cmdline[0] == "trellis-tables") && s.owners.stateIDs[p.Cmdline[1]] {
			result = true
			break
		}
		pid = p.PPID
	}
	for _, p := range walk {
		p.ours = -1
		if result {
			p.ours = 1
		}
	}
	return result
}

func (s *Host) linkOwner(name string) string {
	if !s.attributes() {
		return OwnUnattributed
	}
	if id := plan.DeviceNetID(name); id != "" {
		if s.owners.netIDs[id] {
			return OwnOurs
		}
		return OwnForeign
	}
	if s.owners.HostLinks[name] {
		return OwnHost
	}
	return OwnForeign // a veth or a link made after the suite started, not named by trellis
}

func (s *Host) nodeOwner(pid int) string {
	if !s.attributes() {
		return OwnUnattributed
	}
	f := strings.Fields(s.Nodes[pid])
	if len(f) > 1 && s.owners.stateIDs[f[1]] {
		return OwnOurs
	}
	return OwnForeign
}

// netnsOwner: ours if a process of this run is in it; else, for one held only by a mount or a
// descriptor, whose the mount's path says (pathOwner); else someone else's.
func (s *Host) netnsOwner(ino uint64) string {
	if !s.attributes() {
		return OwnUnattributed
	}
	for _, pid := range s.Netns[ino] {
		if s.procOurs(pid) {
			return OwnOurs
		}
	}
	if len(s.Netns[ino]) > 0 {
		return OwnForeign
	}
	owner := OwnUnattributed
	for _, what := range s.Held[ino] {
		path, ok := strings.CutPrefix(what, "mount ")
		if !ok {
			return OwnOurs // a descriptor of this process
		}
		if o := s.pathOwner(path); o != OwnUnattributed {
			owner = o
		}
	}
	return owner
}

// pathOwner tells whose a mount, pin or control group is from its path: trellis's if it keeps
// it (Owners.Kept), ours if it names one of this run's state or network ids, someone else's if it names another trellis network's
// port namespace (trpNETID), else unattributed.
func (s *Host) pathOwner(path string) string {
	if !s.attributes() {
		return OwnUnattributed
	}
	if s.owners.Kept != nil && s.owners.Kept(path) {
		return OwnKept
	}
	for _, ids := range []map[string]bool{s.owners.stateIDs, s.owners.netIDs} {
		for id := range ids {
			if strings.Contains(path, id) {
				return OwnOurs
			}
		}
	}
	if base := filepath.Base(path); strings.HasPrefix(base, "trp") && plan.DeviceNetID("tr"+base[3:]+"p0") != "" {
		return OwnForeign
	}
	return OwnUnattributed
}

// progOwner finds where a loaded program is held: by a tc filter on a root namespace link, or
// by a process that has it open. A program held nowhere that we can see is of unknown owner.
func (s *Host) progOwner(id uint32) string {
	if !s.attributes() {
		return OwnUnattributed
	}
	s.findProgHolders()
	owner := OwnUnknown
	for _, where := range s.linkOf[id] {
		switch s.linkOwner(strings.Fields(where)[0]) {
		case OwnOurs, OwnHost:
			return OwnOurs
		case OwnForeign:
			owner = OwnForeign
		}
	}
	for _, pid := range s.fdOf[id] {
		if s.procOurs(pid) {
			return OwnOurs
		}
		owner = OwnForeign
	}
	return owner
}

func (s *Host) progWhere(id uint32) string {
	s.findProgHolders()
	var w []string
	for _, l := range s.linkOf[id] {
		w = append(w, "on "+l)
	}
	for _, pid := range s.fdOf[id] {
		w = append(w, fmt.Sprintf("open in pid %d (%s)", pid, s.procName(pid)))
	}
	name := ""
	if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
		if info, err := p.Info(); err == nil {
			name = fmt.Sprintf(" %s (%s)", info.Name, info.Type)
		}
		p.Close()
	}
	if len(w) == 0 {
		w = append(w, "held by nothing visible")
	}
	return fmt.Sprintf("prog %d%s %s", id, name, strings.Join(w, ", "))
}

func (s *Host) findProgHolders() {
	if s.linkOf != nil {
		return
	}
	s.linkOf, s.fdOf = map[uint32][]string{}, map[uint32][]int{}
	_ = inPortNamespaces(func(string) error { s.findLinkProgs(); return nil })
	for pid := range s.procs {
		s.findProgFDs(pid)
	}
}

// findLinkProgs records the eBPF programs on the tc and tcx hooks of the calling thread's
// namespace's links.
func (s *Host) findLinkProgs() {
	links, _ := RetryDump(netlink.LinkList)
	for _, l := range links {
		for _, dir := range []struct {
			parent uint32
			name   string
		}{{netlink.HANDLE_MIN_INGRESS, "ingress"}, {netlink.HANDLE_MIN_EGRESS, "egress"}} {
			filters, err := RetryDump(func() ([]netlink.Filter, error) { return netlink.FilterList(l, dir.parent) })
			if err != nil {
				continue
			}
			for _, f := range filters {
				if bf, ok := f.(*netlink.BpfFilter); ok && bf.Id > 0 {
					s.linkOf[uint32(bf.Id)] = append(s.linkOf[uint32(bf.Id)], l.Attrs().Name+" "+dir.name)
				}
			}
		}
		// Programs on the device's tcx hooks (the shortbridge and impairments where the
		// kernel has tcx).
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
			if err != nil {
				continue // no tcx in this kernel
			}
			for _, ap := range res.Programs {
				s.linkOf[uint32(ap.ID)] = append(s.linkOf[uint32(ap.ID)], l.Attrs().Name+" "+at.String())
			}
		}
	}
}

// findProgFDs records the eBPF programs process pid holds open.
func (s *Host) findProgFDs(pid int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err != nil || target != "anon_inode:bpf-prog" {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					s.fdOf[uint32(id)] = append(s.fdOf[uint32(id)], pid)
				}
			}
		}
	}
}

func (s *Host) procName(pid int) string {
	if p := s.procs[pid]; p != nil && len(p.Cmdline) > 0 {
		return strings.Join(p.Cmdline, " ")
	}
	return "?"
}
