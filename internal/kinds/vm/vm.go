// Package vm is the node kind "vm": a node that is a virtual machine with its own kernel
// (docs/design.md, decision 13). QEMU runs the guest image that internal/image builds, with KVM
// where it works and software emulation (TCG) otherwise; the trellis agent inside the guest
// (internal/guest) sets the node up and runs its commands. Each virtual interface is a
// virtio-net device on a tap device, the port, which the connectors join like any port.
package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/vmsock"
	"golang.org/x/sys/unix"
)

// Name is the kind's name in topology files.
const Name = "vm"

func init() {
	kinds.RegisterNode(Name, Kind{}, spec.NodeKind{Check: check, Settings: nodeSettings, DefaultMemory: DefaultMemory})
}

// DefaultMemory is a VM's guest memory without `memory:`, in a cluster or not.
const DefaultMemory = 512 << 20

// refusals word why a VM node takes no rootfs or image.
var refusals = map[string]spec.Refusal{
	spec.KeyRootfs: {Msg: "a vm node boots its own disk, not a directory",
		Fix: "remove `rootfs:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"},
	spec.KeyImage: {Msg: "a vm node boots its own disk, not a container image",
		Fix: "remove `image:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"},
}

// Takes: a VM node has engines (engine VMs of its own, docs/vm.md); it boots its own disk, so
// it takes no rootfs, image or env, and has no veth ends to carry a data plane (spec.Taker).
func (Kind) Takes(key string) (bool, spec.Refusal) {
	return key == spec.KeyEngines, refusals[key]
}

// NotReady is the digest Running gives a VM whose set-up did not finish.
const NotReady = "not-ready"

// BootTimeout bounds how long a guest may take to answer after QEMU starts.
var BootTimeout = 3 * time.Minute

// Kind is the VM node kind.
type Kind struct{}

// Running finds the network's QEMU processes by their guest names.
func (Kind) Running(env *kinds.Env) (map[string]kinds.Instance, error) {
	found, err := findQEMUs(env)
	if err != nil {
		return nil, err
	}
	out := map[string]kinds.Instance{}
	fes := engineVMs(found, env.Plan)
	for name, all := range found {
		if _, ok := isFE(name); ok {
			continue // an engine VM, part of its node
		}
		in := all[0]
		if pid, _ := readyPID(env, name); pid != in.PID || len(all) > 1 {
			in.Digest = NotReady // its trellis died while starting it: start it again
		}
		if n := env.Plan.Node(name); n != nil && enginesMissing(fes[name], len(n.Engines)) {
			in.Digest = kinds.PartGone // an engine VM is gone (killed): start the node again
		}
		out[name] = in
	}
	for name, in := range orphanEngines(found) {
		out[name] = in // its engine VMs outlived it: Stop ends them, up starts it again
	}
	// The records of VMs that are gone (QEMU was killed) go too.
	records, _ := filepath.Glob(filepath.Join(env.Store.Dir, "vm", env.Plan.NetID+"-*.ready"))
	for _, r := range records {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(r), env.Plan.NetID+"-"), ".ready")
		if _, ok := found[name]; !ok {
			os.Remove(r)
		}
	}
	return out, nil
}

// ErrNoAgent is returned for a request that needs the guest agent of a VM that has none (it
// boots the user's own initrd or disk).
var ErrNoAgent = errors.New("no trellis agent in the guest")

// Start builds (or finds) the guest image, starts QEMU with the node's ports, waits for the
// agent and sets the node up: hostname, files, sysctls, loopback addresses.
func (Kind) Start(ctx context.Context, env *kinds.Env, n *plan.Node) (kinds.Instance, error) {
	in := kinds.Instance{Kind: Name, Name: n.Name, Digest: n.Digest}
	var img image.Image
	var err error
	if knobs(n.Node).Agent() { // the user's own kernel and initrd need none of trellis's image
		if img, err = guestImage(ctx, env, wantsFRR(n.Node)); err != nil {
			return in, err
		}
	} else if _, err = exec.LookPath(QEMU); err != nil {
		return in, fmt.Errorf("VM nodes need QEMU (%v): install qemu-system-x86", err)
	}
	logDir := env.Store.LogDir(env.Plan.Network)
	if err := os.MkdirAll(logDir, state.DirMode); err != nil {
		return in, err
	}
	id, netID := env.Store.ID, env.Plan.NetID
	runAs, err := qemuUser(env)
	if err != nil {
		return in, err
	}
	ps := ports(env.Plan, n)
	var files []*os.File
	defer func() { closeAll(files) }() // QEMU has its own copies
	for i := range ps {
		if err := wire(&ps[i]); err != nil {
			return in, err
		}
		files = append(append(files, ps[i].files...), ps[i].vhost...)
	}
	g, err := createGroup(env, n)
	if err != nil {
		return in, err
	}
	if err := vmsock.Make(id, netID, n.Name); err != nil {
		return in, err
	}
	sock := func(what string) string { return vmsock.Path(id, netID, n.Name, what) }
	argv := args(img, marker(id, netID, n.Name, n.Digest), runAs, sock, filepath.Join(logDir, n.Name+".console"), n, ps)
	disk, err := diskArgs(ctx, env, n)
	if err != nil {
		return in, err
	}
	argv = append(argv, disk...)
	if in.PID, err = launch(ctx, argv, filepath.Join(logDir, n.Name+".qemu"), sock(vmsock.Monitor), files, g); err != nil {
		return in, err
	}
	fes, err := launchEngines(ctx, env, n, img, runAs, g)
	if err != nil {
		return in, err
	}
	for _, p := range ps {
		if err := joinBridge(p); err != nil {
			return in, err
		}
	}
	if !knobs(n.Node).Agent() { // no agent to wait for: the node runs when QEMU does
		if err := tune(in.PID, knobs(n.Node)); err != nil {
			return in, err
		}
		return in, markReady(env, n.Name, in.PID)
	}
	if err := setup(ctx, env, n); err != nil {
		return in, fmt.Errorf("%w (the guest's console: %s)", err, filepath.Join(logDir, n.Name+".console"))
	}
	if err := setupEngines(ctx, env, n, fes); err != nil {
		return in, err
	}
	if err := tune(in.PID, knobs(n.Node)); err != nil {
		return in, err
	}
	return in, markReady(env, n.Name, in.PID)
}

func setup(ctx context.Context, env *kinds.Env, n *plan.Node) error {
	c, err := dial(ctx, env, n.Name)
	if err != nil {
		return err
	}
	defer c.Close()
	req := &guest.Request{Op: "setup", Hostname: n.Name, Sysctl: n.NodeSysctls(env.Plan.Endpoints(n.Name)), Lo: n.Addresses["lo"]}
	for _, f := range n.Files {
		req.Files = append(req.Files, guest.File{Path: f.Path, Content: f.Content, Mode: f.Mode, Owner: f.Owner})
	}
	_, err = c.Do(ctx, req)
	return err
}

// dial connects to a VM's agent, waiting for it to boot.
func dial(ctx context.Context, env *kinds.Env, name string) (*guest.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, BootTimeout)
	defer cancel()
	return guest.Dial(ctx, vmsock.Path(env.Store.ID, env.Plan.NetID, name, vmsock.Agent))
}

// qemuUser is the uid and gid ("UID:GID") a VM's QEMU runs as once it has opened what it
// needs (-runas): the last of its network's range of host uids (docs/design.md, decision 1),
// which no other network's nodes or QEMUs have, and no host user or service. In the network's
// own nodes it is uid 65535, which no software there uses, and which sees no QEMU: their
// PID namespaces hold only their own processes.
func qemuUser(env *kinds.Env) (string, error) {
	base, err := env.Store.AllocUIDs(env.Plan.Network, kinds.UIDBases(env, noderuntime.UIDBases))
	if err != nil {
		return "", err
	}
	id := base + state.UIDRangeSize - 1
	return fmt.Sprintf("%d:%d", id, id), nil
}

// Stop ends the node's QEMU (every one with its guest name, should there be more); its taps go
// with it.
func (Kind) Stop(ctx context.Context, env *kinds.Env, in kinds.Instance) error {
	found, err := findQEMU(env.Store.ID, env.Plan.NetID)
	if err != nil {
		return err
	}
	pids, names := []int{in.PID}, []string{in.Name}
	for name, all := range found {
		node, fe := isFE(name)
		if name != in.Name && (!fe || node != in.Name) {
			continue
		}
		if fe {
			names = append(names, name)
		}
		for _, other := range all { // the node's QEMU, and its engine VMs' (engines.go)
			if other.PID != in.PID {
				pids = append(pids, other.PID)
			}
		}
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
			return fmt.Errorf("ending VM %s (pid %d): %w", in.Name, pid, err)
		}
	}
	os.Remove(readyPath(env, in.Name))
	if err := noderuntime.WaitGone(pids...); err != nil {
		return err
	}
	for _, name := range names { // their sockets
		if err := vmsock.Remove(env.Store.ID, env.Plan.NetID, name); err != nil {
			return err
		}
	}
	if err := removeOverlay(env, in.Name); err != nil {
		return err
	}
	if err := removeGroup(env, in.Name); err != nil {
		return err
	}
	if n := env.Plan.Node(in.Name); n != nil && interconnect(knobs(n.Node)) != InterconnectTap {
		for _, p := range ports(env.Plan, n) {
			if err := unwire(p.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Exec runs the node's start commands in the guest, each through /bin/sh, with their output
// in /var/log/trellis-exec.log there. A command that fails is named in the error.
func (Kind) Exec(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node) error {
	if len(n.Exec) == 0 || !knobs(n.Node).Agent() {
		return nil
	}
	c, err := dial(ctx, env, n.Name)
	if err != nil {
		return err
	}
	defer c.Close()
	const log = "/var/log/trellis-exec.log"
	for i, line := range n.Exec {
		r, err := c.Do(ctx, &guest.Request{Op: "exec", Argv: []string{"/bin/sh", "-c", line}, Log: log})
		if err == nil && r.Exit != 0 {
			tail, _ := c.Do(ctx, &guest.Request{Op: "exec", Argv: []string{"tail", "-n", "10", log}})
			return fmt.Errorf("exec[%d] %q exited with %d; its output:\n%s", i, line, r.Exit, tail.Stdout)
		}
		if err != nil {
			return fmt.Errorf("exec[%d] %q: %w", i, line, err)
		}
	}
	return nil
}

// Run runs argv in the node's guest with stdin's content and writes its output (trellis exec).
// The command runs to its end before its output shows: there is no terminal.
func (Kind) Run(ctx context.Context, env *kinds.Env, in kinds.Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var input []byte
	if stdin != nil {
		var err error
		if input, err = io.ReadAll(stdin); err != nil {
			return 0, err
		}
	}
	if n := env.Plan.Node(in.Name); n != nil && !knobs(n.Node).Agent() {
		return 0, fmt.Errorf("%w: %s boots the user's own initrd or disk; its serial console is logged to NODE.console in the network's log directory", ErrNoAgent, in.Name)
	}
	c, err := dial(ctx, env, in.Name)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r, err := c.Do(ctx, &guest.Request{Op: "exec", Argv: argv, Stdin: string(input)})
	if err != nil {
		return 0, err
	}
	io.WriteString(stdout, r.Stdout)
	io.WriteString(stderr, r.Stderr)
	return r.Exit, nil
}

// readyPath is the file Start writes once a VM is set up, holding QEMU's pid.
func readyPath(env *kinds.Env, name string) string {
	return filepath.Join(env.Store.Dir, "vm", env.Plan.NetID+"-"+name+".ready")
}

func markReady(env *kinds.Env, name string, pid int) error {
	path := readyPath(env, name)
	if err := os.MkdirAll(filepath.Dir(path), state.DirMode); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strconv.Itoa(pid)), state.FileMode)
}

func readyPID(env *kinds.Env, name string) (int, error) {
	data, err := os.ReadFile(readyPath(env, name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// ports lists the ports of node n in plan p, with their links' MTUs.
func ports(p *plan.Plan, n *plan.Node) []vmPort {
	var out []vmPort
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Node == n.Name {
				out = append(out, newPort(port, l.MTU, knobs(n.Node)))
			}
		}
	}
	return out
}
