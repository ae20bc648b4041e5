//go:build integration

// Package integration runs the trellis binary the way a user does, as root, against the real
// kernel, and checks what it leaves on the host.
//
// Run it with `go test -tags integration ./test/integration/ -v` as root. Tests run one after
// another: each compares a snapshot of the host taken at its start with the host at its end.
//
// Other people may use the same machine at the same time (other trellis state directories,
// other tests that make veths, namespaces and eBPF programs). A snapshot difference that is
// provably theirs is therefore logged, not failed on; see diffSnapshots for the exact rules.
// Set TRELLIS_IT_STRICT=1 to fail on every difference.
package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/trellisnet/trellis/internal/vmsock"
	"github.com/vishvananda/netlink"
	"gopkg.in/yaml.v3"
)

// trellisBin is the trellis binary built once by TestMain.
var trellisBin string

// hostLinks are the links of the root namespace that belong to the machine itself: present when
// the suite started, not named by trellis, and not veths (which come and go with containers and
// other tests). Their disappearance, or a change of their qdiscs, always fails a test.
var hostLinks = map[string]bool{}

// binEnv names a trellis binary built beforehand, which the tests use instead of building one
// (in a guest kernel, where there is no Go toolchain to build with: guest_kernel_test.go).
const binEnv = "TRELLIS_IT_BIN"

// timeScale is how much slower than this machine the tests run ($TRELLIS_IT_TIME_SCALE, default
// 1): a guest under software emulation runs trellis about ten times slower, so that a kill
// meant for the middle of an `up` would come before it began (guest_kernel_test.go).
func timeScale() float64 {
	if f, err := strconv.ParseFloat(os.Getenv("TRELLIS_IT_TIME_SCALE"), 64); err == nil && f >= 1 {
		return f
	}
	return 1
}

// cleanTimeout is how long assertClean waits for the kernel to free namespaces and programs.
const cleanTimeout = 15 * time.Second

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if socket := os.Getenv(connectProbeEnv); socket != "" { // run as a probe (vm_localuser_test.go)
		return connectProbe(socket)
	}
	if tap := os.Getenv(tapProbeEnv); tap != "" {
		return tapProbe(tap)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "the trellis integration tests create namespaces, links and eBPF programs: run them as root")
		return 1
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if trellisBin = os.Getenv(binEnv); trellisBin == "" {
		dir, err := os.MkdirTemp("", "trellis-it-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		trellisBin = filepath.Join(dir, "trellis")
		build := exec.Command(goTool(), "build", "-o", trellisBin, "./cmd/trellis")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building trellis in %s: %v\n%s", root, err, out)
			return 1
		}
	}
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listing links:", err)
		return 1
	}
	for _, l := range links {
		if name := l.Attrs().Name; plan.DeviceNetID(name) == "" && l.Type() != "veth" {
			hostLinks[name] = true
		}
	}
	return m.Run()
}

// moduleRoot is the directory holding go.mod (testkit.ModuleRoot).
func moduleRoot() (string, error) { return testkit.ModuleRoot() }

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go" // where scripts/setup.sh's Go lives when PATH lacks it
}

// ---------------------------------------------------------------------------------------------
// Running trellis

// trellis runs the trellis binary with the state directory stateDir.
func trellis(t testing.TB, stateDir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, trellisBin, append([]string{"--state-dir", stateDir}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 10 * time.Second // a daemon left holding the output must not hang the test
	err = cmd.Run()
	return o.String(), e.String(), err
}

// mustTrellis runs trellis and fails the test unless it succeeds. It returns the standard output.
func mustTrellis(t testing.TB, stateDir string, args ...string) string {
	t.Helper()
	out, errOut, err := trellis(t, stateDir, args...)
	if err != nil {
		t.Fatalf("trellis %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// execIn runs a command inside a node with `trellis exec`.
func execIn(t testing.TB, stateDir, network, node string, cmd ...string) (stdout, stderr string, err error) {
	t.Helper()
	return trellis(t, stateDir, append([]string{"exec", network, node, "--"}, cmd...)...)
}

// mustExec runs a command inside a node and fails the test unless it succeeds.
func mustExec(t testing.TB, stateDir, network, node string, cmd ...string) string {
	t.Helper()
	out, errOut, err := execIn(t, stateDir, network, node, cmd...)
	if err != nil {
		t.Fatalf("in %s/%s: %s: %v\nstdout:\n%s\nstderr:\n%s", network, node, strings.Join(cmd, " "), err, out, errOut)
	}
	return out
}

// exitCode returns a command's exit code from its error: 0 for nil, -1 if it did not exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// bgCmd is a command started in a node in the background.
type bgCmd struct {
	cmd    *exec.Cmd
	stdout *bytes.Buffer
	stderr *bytes.Buffer
	lines  chan string // the first lines of standard output, as they come
	done   chan error
}

// startIn starts a command in a node and returns at once. Its standard output lines arrive on
// lines; wait returns the command's error once it exits.
func startIn(t testing.TB, stateDir, network, node string, argv ...string) *bgCmd {
	t.Helper()
	args := append([]string{"--state-dir", stateDir, "exec", network, node, "--"}, argv...)
	cmd := exec.Command(trellisBin, args...)
	return startBg(t, cmd, fmt.Sprintf("%s in %s/%s", strings.Join(argv, " "), network, node))
}

// waitLine waits for the next line of standard output.
func (b *bgCmd) waitLine(timeout time.Duration) (string, bool) {
	select {
	case l, ok := <-b.lines:
		return l, ok
	case <-time.After(timeout):
		return "", false
	}
}

// wait waits for the command to exit, killing it after timeout.
func (b *bgCmd) wait(timeout time.Duration) error {
	select {
	case err := <-b.done:
		return err
	case <-time.After(timeout):
		b.cmd.Process.Kill()
		<-b.done
		return fmt.Errorf("killed after %v", timeout)
	}
}

// ---------------------------------------------------------------------------------------------
// Topology files, state directories and per-test set-up

var topoSeq struct {
	sync.Mutex
	n int
}

// writeTopo writes a topology file into the test's temporary directory and returns its path.
func writeTopo(t testing.TB, doc string) string {
	t.Helper()
	topoSeq.Lock()
	topoSeq.n++
	n := topoSeq.n
	topoSeq.Unlock()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("topo%d.yaml", n))
	rewriteTopo(t, path, doc)
	return path
}

// rewriteTopo replaces the content of a topology file.
func rewriteTopo(t testing.TB, path, doc string) {
	t.Helper()
	var head struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err == nil && head.Name != "" {
		registerNetwork(head.Name)
	}
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newStateDir returns a fresh state directory. When the test ends, every network in it is
// taken down, so that a failing test leaves nothing behind.
func newStateDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	registerStateDir(dir)
	t.Cleanup(func() {
		if _, errOut, err := trellis(t, dir, "down", "--all"); err != nil {
			t.Errorf("cleanup: trellis down --all: %v\n%s", err, errOut)
		}
	})
	return dir
}

// env is one test's set-up: a host snapshot taken first, and a state directory.
type env struct {
	t       testing.TB
	before  *hostSnapshot
	state   string
	checked bool
}

// start snapshots the host and makes a state directory. If the test ends without calling
// e.assertClean (because it failed), the cleanup takes every network down and then checks
// the host all the same.
func start(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, before: snapshot(t)}
	// Make the test's temporary directory first: cleanups run last-registered first, and the
	// state directory in it must outlive assertClean, which reads its id to tell our leftovers
	// from other people's.
	t.TempDir()
	t.Cleanup(func() { // runs after newStateDir's `down --all`
		if !e.checked {
			assertClean(t, e.before)
		}
	})
	e.state = newStateDir(t)
	return e
}

func (e *env) assertClean() {
	e.t.Helper()
	e.checked = true
	assertClean(e.t, e.before)
}

func nonce() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ---------------------------------------------------------------------------------------------
// Reading networks back

type netInfo struct {
	Name   string     `json:"name"`
	NetID  string     `json:"netid"`
	Status string     `json:"status"`
	Nodes  []nodeInfo `json:"nodes"`
	Links  []linkInfo `json:"links"`
}

type nodeInfo struct {
	Name       string   `json:"name"`
	PID        int      `json:"pid"`
	Running    bool     `json:"running"`
	Interfaces []ifInfo `json:"interfaces"`
}

type ifInfo struct {
	Name      string   `json:"name"`
	MAC       string   `json:"mac"`
	MTU       int      `json:"mtu"`
	State     string   `json:"state"`
	Addresses []string `json:"addresses"`
}

type linkInfo struct {
	Name      string         `json:"name"`
	Connector string         `json:"connector"`
	Rate      string         `json:"rate"`
	Bridge    string         `json:"bridge"`
	State     string         `json:"state"`
	MTU       int            `json:"mtu"`
	Endpoints []endpointInfo `json:"endpoints"`
	LAN       *lanInfo       `json:"lan"`
}

type lanInfo struct {
	Table   int     `json:"table"`
	Ageing  float64 `json:"ageing_seconds"`
	Entries []struct {
		MAC    string  `json:"mac"`
		Member string  `json:"member"`
		Idle   float64 `json:"idle_seconds"`
	} `json:"entries"`
	Error string `json:"error"`
}

type endpointInfo struct {
	Node       string `json:"node"`
	Interface  string `json:"interface"`
	Port       string `json:"port"`
	TxPackets  uint64 `json:"tx_packets"`
	RxPackets  uint64 `json:"rx_packets"`
	TxBytes    uint64 `json:"tx_bytes"`
	RxBytes    uint64 `json:"rx_bytes"`
	Drops      uint64 `json:"drops"`
	State      string `json:"state"`
	Impairment string `json:"impairment"`
}

func inspect(t testing.TB, stateDir, network string) *netInfo {
	t.Helper()
	out := mustTrellis(t, stateDir, "inspect", network, "--json")
	var info netInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect %s --json: %v\n%s", network, err, out)
	}
	return &info
}

func (n *netInfo) node(t testing.TB, name string) nodeInfo {
	t.Helper()
	for _, nd := range n.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	t.Fatalf("network %s has no node %s", n.Name, name)
	return nodeInfo{}
}

func (n *netInfo) iface(t testing.TB, node, ifname string) ifInfo {
	t.Helper()
	for _, i := range n.node(t, node).Interfaces {
		if i.Name == ifname {
			return i
		}
	}
	t.Fatalf("node %s of network %s has no interface %s", node, n.Name, ifname)
	return ifInfo{}
}

func (n *netInfo) link(t testing.TB, name string) linkInfo {
	t.Helper()
	for _, l := range n.Links {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("network %s has no link %s", n.Name, name)
	return linkInfo{}
}

func (n *netInfo) pids() map[string]int {
	out := map[string]int{}
	for _, nd := range n.Nodes {
		out[nd.Name] = nd.PID
	}
	return out
}

// listNetworks returns the network names `trellis ls` prints.
func listNetworks(t testing.TB, stateDir string) []string {
	t.Helper()
	out := mustTrellis(t, stateDir, "ls")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "NETWORK") {
		t.Fatalf("trellis ls: no header line:\n%s", out)
	}
	var names []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// ping pings addr from a node and fails the test if no reply comes.
func ping(t testing.TB, stateDir, network, node, addr string) {
	t.Helper()
	if err := tryPing(t, stateDir, network, node, addr); err != nil {
		t.Fatal(err)
	}
}

func tryPing(t testing.TB, stateDir, network, node, addr string) error {
	t.Helper()
	args := []string{"ping", "-c", "2", "-i", "0.2", "-W", "2"}
	if strings.Contains(addr, ":") {
		args = append(args, "-6")
	}
	out, errOut, err := execIn(t, stateDir, network, node, append(args, addr)...)
	if err != nil {
		return fmt.Errorf("ping %s from %s/%s: %v\n%s%s", addr, network, node, err, out, errOut)
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// What belongs to this test run

var reg struct {
	sync.Mutex
	stateDirs map[string]string // state directory -> its id, once trellis has made it
	networks  map[string]bool   // every network name a topology file of this run declared
}

func registerStateDir(dir string) {
	reg.Lock()
	defer reg.Unlock()
	if reg.stateDirs == nil {
		reg.stateDirs = map[string]string{}
	}
	reg.stateDirs[dir] = ""
}

func registerNetwork(name string) {
	reg.Lock()
	defer reg.Unlock()
	if reg.networks == nil {
		reg.networks = map[string]bool{}
	}
	reg.networks[name] = true
}

// ours returns the ids of this run's state directories and the network ids derived from them.
func ours() (stateIDs, netIDs map[string]bool) {
	reg.Lock()
	defer reg.Unlock()
	stateIDs, netIDs = map[string]bool{}, map[string]bool{}
	for dir, id := range reg.stateDirs {
		if id == "" {
			data, err := os.ReadFile(filepath.Join(dir, "id"))
			if err != nil {
				continue
			}
			id = strings.TrimSpace(string(data))
			reg.stateDirs[dir] = id
		}
		stateIDs[id] = true
		for name := range reg.networks {
			netIDs[plan.NetID(id, name)] = true
			for i := 1; i <= 3; i++ { // ids allocated to a network whose derived id was taken
				netIDs[plan.NetID(id, fmt.Sprintf("%s#%d", name, i))] = true
			}
		}
	}
	return stateIDs, netIDs
}

// ---------------------------------------------------------------------------------------------
// Host snapshots

// Owners of what a snapshot holds.
const (
	ownOurs    = "ours"    // made by this test run
	ownForeign = "foreign" // provably someone else's
	ownHost    = "host"    // the machine's own (hostLinks)
	ownUnknown = "unknown" // no owner found
)

// hostSnapshot is what trellis may change on the host.
type hostSnapshot struct {
	Links  map[string]string // root namespace link name -> type
	Qdiscs map[string]string // qdisc description -> link name
	Netns  map[uint64][]int  // network namespace inode -> pids of processes in it
	Progs  map[uint32]bool   // loaded eBPF program ids
	Nodes  map[int]string    // pid -> command line of trellis-node (and trellis-tables) processes
	// Groups are the nodes' control groups ("HIERARCHY/trellis/STATEID.NETID.NODE"), the
	// networks' /etc copies where trellis kept them on disk before they moved to memory
	// ("/run/trellis/STATEID/etc/NETWORK"), the networks' VM socket directories
	// ("/run/trellis/vm/STATEID.NETID"), and the uid range registry's
	// entries ("/var/lib/trellis-uid-ranges/BASE"), each with its state id.
	Groups map[string]string
	procs  map[int]*procEntry  // every process, for owners
	linkOf map[uint32][]string // eBPF program id -> "link ingress/egress" where attached (lazy)
	fdOf   map[uint32][]int    // eBPF program id -> pids holding it open (lazy)

	stateIDs, netIDs map[string]bool
}

type procEntry struct {
	ppid    int
	cmdline []string
	ours    int8 // 0 unknown yet, 1 ours, -1 not
}

// snapshot records the root namespace's links and qdiscs, the network namespaces in use, the
// loaded eBPF programs and the trellis-node processes.
func snapshot(t testing.TB) *hostSnapshot {
	t.Helper()
	s, err := takeSnapshot()
	if err != nil {
		t.Fatalf("host snapshot: %v", err)
	}
	return s
}

func takeSnapshot() (*hostSnapshot, error) {
	s := &hostSnapshot{Links: map[string]string{}, Qdiscs: map[string]string{}, Netns: map[uint64][]int{},
		Progs: map[uint32]bool{}, Nodes: map[int]string{}, Groups: map[string]string{}}
	s.stateIDs, s.netIDs = ours()
	if err := s.readGroups(); err != nil {
		return nil, err
	}

	// Qdiscs before links, so that every qdisc's link is in the list; a qdisc whose link was
	// deleted in between is skipped.
	qdiscs, err := retryDump(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(nil) })
	if err != nil {
		return nil, fmt.Errorf("listing qdiscs: %w", err)
	}
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
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

	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing eBPF programs: %w", err)
		}
		s.Progs[uint32(next)] = true
		id = next
	}

	s.procs = readProcs()
	for pid, p := range s.procs {
		if len(p.cmdline) > 0 && (p.cmdline[0] == "trellis-node" || p.cmdline[0] == "trellis-tables") {
			s.Nodes[pid] = strings.Join(p.cmdline, " ")
		}
		if vm := qemuMarker(p.cmdline); vm != "" {
			s.Nodes[pid] = vm
		}
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue // gone, or a kernel thread
		}
		var ino uint64
		if _, err := fmt.Sscanf(target, "net:[%d]", &ino); err == nil {
			s.Netns[ino] = append(s.Netns[ino], pid)
		}
	}
	return s, nil
}

// readGroups lists the nodes' control groups in every cgroup hierarchy, the networks'
// copies of /etc and their VM socket directories.
func (s *hostSnapshot) readGroups() error {
	globs := []string{"/sys/fs/cgroup/*/trellis/*", "/sys/fs/cgroup/trellis/*", "/run/trellis/*/etc/*", vmsock.RunDir + "/*"}
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

// readUIDRanges lists the machine's uid range registry: an entry (a file named by the range's
// first uid) holds its state directory, whose id says whose it is.
func (s *hostSnapshot) readUIDRanges() error {
	dir := state.UIDRegistryDir()
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

// stateOwner tells whose a group or /etc copy of state directory id is.
func (s *hostSnapshot) stateOwner(id string) string {
	if s.stateIDs[id] {
		return ownOurs
	}
	return ownForeign
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

// retryDump repeats a netlink dump that the kernel interrupted because the list changed.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
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

func readProcs() map[int]*procEntry {
	out := map[int]*procEntry{}
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
		out[pid] = &procEntry{ppid: ppid, cmdline: argv}
	}
	return out
}

// procOurs tells whether a process belongs to this test run: it is the test process or one of
// its descendants, a node of one of this run's state directories, or a process inside one.
func (s *hostSnapshot) procOurs(pid int) bool {
	self := os.Getpid()
	var walk []*procEntry
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
		if len(p.cmdline) > 1 && (p.cmdline[0] == "trellis-node" || p.cmdline[0] == "trellis-engines" || p.cmdline[0] == "trellis-delayline" || p.cmdline[0] == "trellis-tables") && s.stateIDs[p.cmdline[1]] {
			result = true
			break
		}
		pid = p.ppid
	}
	for _, p := range walk {
		p.ours = -1
		if result {
			p.ours = 1
		}
	}
	return result
}

func (s *hostSnapshot) linkOwner(name string) string {
	if id := plan.DeviceNetID(name); id != "" {
		if s.netIDs[id] {
			return ownOurs
		}
		return ownForeign
	}
	if hostLinks[name] {
		return ownHost
	}
	return ownForeign // a veth or a link made after the suite started, not named by trellis
}

func (s *hostSnapshot) nodeOwner(pid int) string {
	f := strings.Fields(s.Nodes[pid])
	if len(f) > 1 && s.stateIDs[f[1]] {
		return ownOurs
	}
	return ownForeign
}

func (s *hostSnapshot) netnsOwner(ino uint64) string {
	for _, pid := range s.Netns[ino] {
		if s.procOurs(pid) {
			return ownOurs
		}
	}
	return ownForeign
}

// progOwner finds where a loaded program is held: by a tc filter on a root namespace link, or
// by a process that has it open. A program held nowhere that we can see is of unknown owner.
func (s *hostSnapshot) progOwner(id uint32) string {
	s.findProgHolders()
	owner := ownUnknown
	for _, where := range s.linkOf[id] {
		switch s.linkOwner(strings.Fields(where)[0]) {
		case ownOurs, ownHost:
			return ownOurs
		case ownForeign:
			owner = ownForeign
		}
	}
	for _, pid := range s.fdOf[id] {
		if s.procOurs(pid) {
			return ownOurs
		}
		owner = ownForeign
	}
	return owner
}

func (s *hostSnapshot) progWhere(id uint32) string {
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

func (s *hostSnapshot) findProgHolders() {
	if s.linkOf != nil {
		return
	}
	s.linkOf, s.fdOf = map[uint32][]string{}, map[uint32][]int{}
	links, _ := retryDump(netlink.LinkList)
	for _, l := range links {
		for _, dir := range []struct {
			parent uint32
			name   string
		}{{netlink.HANDLE_MIN_INGRESS, "ingress"}, {netlink.HANDLE_MIN_EGRESS, "egress"}} {
			filters, err := retryDump(func() ([]netlink.Filter, error) { return netlink.FilterList(l, dir.parent) })
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
	for pid := range s.procs {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
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
}

func (s *hostSnapshot) procName(pid int) string {
	if p := s.procs[pid]; p != nil && len(p.cmdline) > 0 {
		return strings.Join(p.cmdline, " ")
	}
	return "?"
}

// change is one difference between two snapshots.
type change struct {
	op    string // "+" appeared, "-" disappeared
	kind  string
	what  string
	owner string
}

func (c change) String() string { return fmt.Sprintf("%s %-6s %s [%s]", c.op, c.kind, c.what, c.owner) }

// diffSnapshots compares two snapshots. fail lists the differences that count; excused those
// that provably belong to someone else, or that this run cannot have caused:
//   - something that appeared is excused only if it is foreign: a link named by another state
//     directory's trellis or a non-host, non-trellis link; a qdisc on such a link; a namespace
//     that no process of this run is in; a node of another state directory; an eBPF program
//     attached to a foreign link or held open only by processes not of this run.
//   - something that disappeared is excused unless it is a host link or a qdisc of one: this
//     run is checked for what it leaves, and what others remove is theirs to remove.
//
// With TRELLIS_IT_STRICT=1 nothing is excused.
func diffSnapshots(before, after *hostSnapshot) (fail, excused []change) {
	strict := os.Getenv("TRELLIS_IT_STRICT") != ""
	add := func(c change) {
		ok := false
		switch c.op {
		case "+":
			ok = c.owner == ownForeign
		case "-":
			ok = c.owner != ownHost
		}
		if ok && !strict {
			excused = append(excused, c)
		} else {
			fail = append(fail, c)
		}
	}
	for name, typ := range after.Links {
		if _, ok := before.Links[name]; !ok {
			add(change{"+", "link", name + " (" + typ + ")", after.linkOwner(name)})
		}
	}
	for name, typ := range before.Links {
		if _, ok := after.Links[name]; !ok {
			add(change{"-", "link", name + " (" + typ + ")", after.linkOwner(name)})
		}
	}
	for q, link := range after.Qdiscs {
		if _, ok := before.Qdiscs[q]; !ok {
			add(change{"+", "qdisc", q, after.linkOwner(link)})
		}
	}
	for q, link := range before.Qdiscs {
		if _, ok := after.Qdiscs[q]; !ok {
			add(change{"-", "qdisc", q, after.linkOwner(link)})
		}
	}
	for ino := range after.Netns {
		if _, ok := before.Netns[ino]; !ok {
			add(change{"+", "netns", after.netnsDesc(ino), after.netnsOwner(ino)})
		}
	}
	for ino := range before.Netns {
		if _, ok := after.Netns[ino]; !ok {
			add(change{"-", "netns", before.netnsDesc(ino), before.netnsOwner(ino)})
		}
	}
	for id := range after.Progs {
		if !before.Progs[id] {
			add(change{"+", "bpf", after.progWhere(id), after.progOwner(id)})
		}
	}
	for id := range before.Progs {
		if !after.Progs[id] {
			add(change{"-", "bpf", fmt.Sprintf("prog %d", id), ownUnknown})
		}
	}
	for path, id := range after.Groups {
		if _, ok := before.Groups[path]; !ok {
			add(change{"+", "group", path, after.stateOwner(id)})
		}
	}
	for path, id := range before.Groups {
		if _, ok := after.Groups[path]; !ok {
			add(change{"-", "group", path, before.stateOwner(id)})
		}
	}
	for pid, cmd := range after.Nodes {
		if before.Nodes[pid] != cmd {
			add(change{"+", "node", fmt.Sprintf("pid %d: %s", pid, cmd), after.nodeOwner(pid)})
		}
	}
	for pid, cmd := range before.Nodes {
		if after.Nodes[pid] != cmd {
			add(change{"-", "node", fmt.Sprintf("pid %d: %s", pid, cmd), before.nodeOwner(pid)})
		}
	}
	sortChanges(fail)
	sortChanges(excused)
	return fail, excused
}

func (s *hostSnapshot) netnsDesc(ino uint64) string {
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
	return fmt.Sprintf("net:[%d] in use by %s", ino, strings.Join(holders, ", "))
}

func sortChanges(cs []change) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].kind != cs[j].kind {
			return cs[i].kind < cs[j].kind
		}
		return cs[i].what < cs[j].what
	})
}

func formatChanges(cs []change, max int) string {
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

// assertClean waits (up to cleanTimeout: the kernel frees namespaces and eBPF programs
// asynchronously) until the host is as the snapshot before recorded it, and fails the test with
// every remaining difference otherwise.
func assertClean(t testing.TB, before *hostSnapshot) {
	t.Helper()
	deadline := time.Now().Add(cleanTimeout)
	for {
		after, err := takeSnapshot()
		if err != nil {
			if time.Now().After(deadline) {
				t.Errorf("host snapshot: %v", err)
				return
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		fail, excused := diffSnapshots(before, after)
		if len(fail) == 0 {
			if len(excused) > 0 {
				t.Logf("host clean; ignored %d changes by others on this machine:\n%s", len(excused), formatChanges(excused, 10))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the host is not as it was before the test, %v later; %d differences:\n%s(ignored as others': %d)",
				cleanTimeout, len(fail), formatChanges(fail, 200), len(excused))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// assertSame fails unless two snapshots are the same but for others' changes, at once.
func assertSame(t testing.TB, a, b *hostSnapshot) {
	t.Helper()
	fail, excused := diffSnapshots(a, b)
	if len(fail) > 0 {
		t.Errorf("the host changed; %d differences:\n%s(ignored as others': %d)", len(fail), formatChanges(fail, 200), len(excused))
	}
}

// oursCount counts what of this run a snapshot holds, by kind, to check that the snapshot sees.
func (s *hostSnapshot) oursCount() map[string]int {
	n := map[string]int{}
	for name := range s.Links {
		if s.linkOwner(name) == ownOurs {
			n["link"]++
		}
	}
	for _, link := range s.Qdiscs {
		if s.linkOwner(link) == ownOurs {
			n["qdisc"]++
		}
	}
	for ino := range s.Netns {
		if s.netnsOwner(ino) == ownOurs && ino != rootNetns() {
			n["netns"]++
		}
	}
	for id := range s.Progs {
		if s.progOwner(id) == ownOurs {
			n["bpf"]++
		}
	}
	for pid := range s.Nodes {
		if s.nodeOwner(pid) == ownOurs {
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

// killProcess sends SIGKILL to a process.
func killProcess(p *os.Process) error { return p.Signal(syscall.SIGKILL) }
