//go:build integration

// Package integration runs the trellis binary the way a user does, as root, against the real
// kernel, and checks what it leaves on the host.
//
// Run it with `go test -tags integration ./test/integration/ -v` as root. Tests run one after
// another: each compares a snapshot of the host taken at its start with the host at its end.
//
// Other people may use the same machine at the same time (other trellis state directories,
// other tests that make veths, namespaces and eBPF programs). A snapshot difference that is
// provably theirs is therefore logged, not failed on; see internal/testkit (Diff) for the exact
// rules.
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
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
	links, err := testkit.RetryDump(netlink.LinkList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listing links:", err)
		return 1
	}
	for _, l := range links {
		if name := l.Attrs().Name; plan.DeviceNetID(name) == "" && l.Type() != "veth" {
			hostLinks[name] = true
		}
	}
	testkit.SetOwners(testkit.Owners{IDs: ours, HostLinks: hostLinks, UIDRegistry: state.UIDRegistryDir(),
		Kept: func(path string) bool {
			return filepath.Base(path) == cgroup.Parent && strings.HasPrefix(path, "/sys/fs/cgroup/")
		},
		Strict: os.Getenv("TRELLIS_IT_STRICT") != ""})
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
	before  *testkit.Host
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
	// ImpairDrops and Duplicated count what the impairment of the frames the endpoint sends did.
	ImpairDrops uint64 `json:"impair_drops"`
	Duplicated  uint64 `json:"duplicated"`
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
// Host snapshots (internal/testkit: Snapshot, Diff, CheckClean), with this run's owners

// snapshot records the host.
func snapshot(t testing.TB) *testkit.Host {
	t.Helper()
	s, err := testkit.Snapshot()
	if err != nil {
		t.Fatalf("host snapshot: %v", err)
	}
	return s
}

// assertClean waits (up to cleanTimeout: the kernel frees namespaces and eBPF programs
// asynchronously) until the host is as the snapshot before recorded it, and fails the test with
// every remaining difference otherwise.
func assertClean(t testing.TB, before *testkit.Host) {
	t.Helper()
	testkit.CheckClean(t, before, cleanTimeout)
}

// assertSame fails unless two snapshots are the same but for others' changes, at once.
func assertSame(t testing.TB, a, b *testkit.Host) {
	t.Helper()
	testkit.CheckSame(t, a, b)
}

// killProcess sends SIGKILL to a process.
func killProcess(p *os.Process) error { return p.Signal(syscall.SIGKILL) }
