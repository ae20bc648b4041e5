package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/vmsock"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Host is a snapshot of what trellis, or a test, may change on the host and leave behind by
// mistake: the root namespace's links and their qdiscs, the network namespaces in use (by a
// process, a mount or a descriptor of this process), the loaded eBPF programs and the pins
// under /sys/fs/bpf, the processes of trellis's nodes (containers' inits, table servers, VMs'
// QEMU), this process's mounts, the control groups (the top ones of every hierarchy, v1 and v2,
// and those under trellis's), and trellis's files outside its state directories: the networks'
// /etc copies and VM socket directories under /run/trellis and the uid range registry's
// entries. Diff compares two; CheckClean and LeaveHostAsFound check a test against one.
type Host struct {
	Links  map[string]string // root namespace link name -> type
	Qdiscs map[string]string // qdisc description -> link name
	// Netns are the network namespaces in use by inode: the pids of the processes in each,
	// and what else holds it ("mount /run/netns/x", "descriptor of this process").
	Netns  map[uint64][]int
	Held   map[uint64][]string
	Progs  map[uint32]bool // loaded eBPF program ids
	Pins   map[string]bool // paths under /sys/fs/bpf
	Nodes  map[int]string  // pid -> command line of trellis-node and trellis-tables processes, or a VM's marker
	Mounts map[string]bool // "MOUNTPOINT (TYPE)" of this process's mount namespace
	// Cgroups are the top control groups of every hierarchy (not deeper, where systemd's
	// units come and go).
	Cgroups map[string]bool
	// Groups are the nodes' control groups ("HIERARCHY/trellis/STATEID.NETID.NODE"), the
	// networks' /etc copies where trellis kept them on disk before they moved to memory
	// ("/run/trellis/STATEID/etc/NETWORK"), the networks' VM socket directories
	// ("/run/trellis/vm/STATEID.NETID"), and the uid range registry's entries
	// ("/var/lib/trellis-uid-ranges/BASE"), each with its state id.
	Groups map[string]string

	procs  map[int]*Process    // every process, for owners
	linkOf map[uint32][]string // eBPF program id -> "link ingress/egress" where attached (lazy)
	fdOf   map[uint32][]int    // eBPF program id -> pids holding it open (lazy)
	owners Owners              // when it was taken
}

// Process is one process of the host, from /proc.
type Process struct {
	PPID    int
	Cmdline []string
	ours    int8 // 0 unknown yet, 1 ours, -1 not
}

// cgroupRoot is where the control group hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Snapshot records the host (Host).
func Snapshot() (*Host, error) {
	s := &Host{Links: map[string]string{}, Qdiscs: map[string]string{}, Netns: map[uint64][]int{}, Held: map[uint64][]string{},
		Progs: map[uint32]bool{}, Pins: map[string]bool{}, Nodes: map[int]string{}, Mounts: map[string]bool{},
		Cgroups: map[string]bool{}, Groups: map[string]string{}, owners: currentOwners()}
	if err := s.readGroups(); err != nil {
		return nil, err
	}
	if err := s.readLinks(); err != nil {
		return nil, err
	}
	if err := s.readProgs(); err != nil {
		return nil, err
	}
	if err := s.readMounts(); err != nil {
		return nil, err
	}
	s.readCgroups()
	s.procs = Processes()
	for pid, p := range s.procs {
		if len(p.Cmdline) > 0 && (p.Cmdline[0] == "trellis-node" || p.Cmdline[0] == "trellis-tables") {
			s.Nodes[pid] = strings.Join(p.Cmdline, " ")
		}
		if vm := qemuMarker(p.Cmdline); vm != "" {
			s.Nodes[pid] = vm
		}
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue // gone, or a kernel thread
		}
		if ino, ok := netnsIno(target); ok {
			s.Netns[ino] = append(s.Netns[ino], pid)
		}
	}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil {
			if ino, ok := netnsIno(target); ok {
				s.hold(ino, "descriptor of this process")
			}
		}
	}
	return s, nil
}

// netnsIno reads a network namespace's inode from "net:[INO]".
func netnsIno(target string) (uint64, bool) {
	var ino uint64
	_, err := fmt.Sscanf(target, "net:[%d]", &ino)
	return ino, err == nil
}

// hold records what holds namespace ino besides processes.
func (s *Host) hold(ino uint64, what string) {
	if _, ok := s.Netns[ino]; !ok {
		s.Netns[ino] = nil
	}
	if !slices.Contains(s.Held[ino], what) {
		s.Held[ino] = append(s.Held[ino], what)
	}
}

// readLinks lists the links and their qdiscs of the root namespace and of every trellis port
// namespace (inPortNamespaces; their loopbacks aside): qdiscs first, so that every qdisc's link
// is in the list; a qdisc whose link was deleted in between is skipped.
func (s *Host) readLinks() error {
	return inPortNamespaces(func(portNS string) error {
		qdiscs, err := RetryDump(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(nil) })
		if err != nil {
			return fmt.Errorf("listing qdiscs%s: %w", portNS, err)
		}
		links, err := RetryDump(netlink.LinkList)
		if err != nil {
			return fmt.Errorf("listing links%s: %w", portNS, err)
		}
		names := map[int]string{}
		for _, l := range links {
			if portNS != "" && l.Attrs().Flags&net.FlagLoopback != 0 {
				continue // the namespace's own, gone with it
			}
			s.Links[l.Attrs().Name] = l.Type()
			names[l.Attrs().Index] = l.Attrs().Name
		}
		for _, q := range qdiscs {
			a := q.Attrs()
			name, ok := names[a.LinkIndex]
			if !ok {
				continue
			}
			desc := fmt.Sprintf("%s: %s %s parent %s", name, q.Type(), netlink.HandleStr(a.Handle), netlink.HandleStr(a.Parent))
			if tbf, ok := q.(*netlink.Tbf); ok {
				desc += fmt.Sprintf(" rate %dbit burst %d limit %d", tbf.Rate*8, tbf.Buffer, tbf.Limit)
			}
			s.Qdiscs[desc] = name
		}
		return nil
	})
}

// inPortNamespaces runs f in the calling thread's namespace (the root) with portNS "", then on
// a thread inside each trellis port namespace bound under /run/netns (trpNETID, see package
// substrate) with portNS " in /run/netns/NAME", so that a snapshot sees the ports of networks
// that have their ports there. A namespace that went in between is skipped.
func inPortNamespaces(f func(portNS string) error) error {
	if err := f(""); err != nil {
		return err
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "trp") || plan.DeviceNetID("tr"+name[3:]+"p0") == "" {
			continue
		}
		ns, err := netns.GetFromPath(filepath.Join("/run/netns", name))
		if err != nil {
			continue
		}
		err = netnsutil.Do(ns, func() error { return f(" in /run/netns/" + name) })
		ns.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// readProgs lists the loaded eBPF programs and the pins under /sys/fs/bpf.
func (s *Host) readProgs() error {
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("listing eBPF programs: %w", err)
		}
		s.Progs[uint32(next)] = true
		id = next
	}
	_ = filepath.WalkDir("/sys/fs/bpf", func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != "/sys/fs/bpf" {
			s.Pins[p] = true
		}
		return nil
	})
	return nil
}

// readMounts lists this process's mounts, and the network namespaces mounted (nsfs).
func (s *Host) readMounts() error {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		f := strings.Fields(line)
		if sep := slices.Index(f, "-"); sep >= 5 && sep+1 < len(f) {
			s.Mounts[fmt.Sprintf("%s (%s)", f[4], f[sep+1])] = true
			if ino, ok := netnsIno(f[3]); ok && f[sep+1] == "nsfs" {
				s.hold(ino, "mount "+f[4])
			}
		}
	}
	return nil
}

// readCgroups lists the top control groups of every hierarchy.
func (s *Host) readCgroups() {
	hierarchies := []string{cgroupRoot} // v2: one
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.procs")); err != nil {
		hierarchies = subdirs(cgroupRoot) // v1: one mount per controller, under a tmpfs
	}
	for _, top := range hierarchies {
		for _, g := range subdirs(top) {
			s.Cgroups[g] = true
		}
	}
}

// subdirs lists the directories in dir (none if it cannot be read).
func subdirs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// readGroups lists the nodes' control groups in every cgroup hierarchy, the networks'
// copies of /etc, their VM socket directories and the uid range registry's entries.
func (s *Host) readGroups() error {
	globs := []string{cgroupRoot + "/*/trellis/*", cgroupRoot + "/trellis/*", "/run/trellis/*/etc/*", vmsock.RunDir + "/*"}
	for _, g := range globs {
		paths, err := filepath.Glob(g)
		if err != nil {
			return err
		}
		for _, p := range paths {
			// A group is STATEID.NETID.NODE, a VM socket directory STATEID.NETID.
			id, _, _ := strings.Cut(filepath.Base(p), ".")
			if filepath.Base(filepath.Dir(p)) == "etc" {
				id = filepath.Base(filepath.Dir(filepath.Dir(p)))
			}
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				s.Groups[p] = id
			}
		}
	}
	return s.readUIDRanges()
}

// readUIDRanges lists the machine's uid range registry (Owners.UIDRegistry): an entry (a file named by the range's
// first uid) holds its state directory, whose id says whose it is.
func (s *Host) readUIDRanges() error {
	dir := s.owners.UIDRegistry
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, err := strconv.ParseUint(e.Name(), 10, 32); err != nil {
			continue // the lock, a temporary file
		}
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue // released in between
		}
		stateDir, _, _ := strings.Cut(string(data), "\n")
		id, err := os.ReadFile(filepath.Join(stateDir, "id"))
		if err != nil {
			id = []byte("unknown state directory " + stateDir)
		}
		s.Groups[p] = strings.TrimSpace(string(id))
	}
	return nil
}

// qemuMarker returns "trellis-vm STATEID NETID NODE" for the QEMU process of a VM node (its
// -name guest=trellis-vm/STATEID/NETID/NODE/DIGEST), else "".
func qemuMarker(cmdline []string) string {
	for _, arg := range cmdline {
		if rest, ok := strings.CutPrefix(arg, "guest=trellis-vm/"); ok {
			rest, _, _ = strings.Cut(rest, ",")
			return "trellis-vm " + strings.Join(strings.Split(rest, "/"), " ")
		}
	}
	return ""
}

// RetryDump repeats a netlink dump that the kernel interrupted because the list changed.
func RetryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var (
		out []T
		err error
	)
	for i := range 100 {
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
		time.Sleep(time.Duration(i) * time.Millisecond)
	}
	return out, err
}

// Processes reads every process of the host from /proc, by pid.
func Processes() map[int]*Process {
	out := map[int]*Process{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		var argv []string
		if len(cmd) > 0 {
			argv = strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00")
		}
		out[pid] = &Process{PPID: ppid, Cmdline: argv}
	}
	return out
}
