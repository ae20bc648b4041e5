// Package container is the node kind "container": a node built by trellis itself from Linux
// namespaces (internal/noderuntime), whose virtual interfaces are veth pairs with one end inside the
// node and the other, the port, in the substrate.
package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// Name is the kind's name in topology files.
const Name = "container"

func init() {
	kinds.RegisterNode(Name, Kind{}, spec.NodeKind{Check: check})
}

// Takes: a container node takes every key only some kinds take: its own root (rootfs, image,
// env), engines, and a data plane on the substrate ends of its veth pairs (spec.Taker).
func (Kind) Takes(key string) (bool, spec.Refusal) {
	switch key {
	case spec.KeyRootfs, spec.KeyImage, spec.KeyEnv, spec.KeyEngines, spec.KeyDataplane:
		return true, spec.Refusal{}
	}
	return false, spec.Refusal{}
}

// NotReady is the digest Running gives a node whose init has not finished setting it up (its
// trellis was killed while starting it).
const NotReady = "not-ready"

// Kind is the container node kind.
type Kind struct{}

// Tasks is what a node holds of the host's tasks while idle: its init, one task. What the
// node's own programs start comes on top, within its pids limit.
func (Kind) Tasks(*plan.Node) int { return noderuntime.InitTasks }

// Running finds the network's node init processes by their markers in /proc.
func (Kind) Running(env *kinds.Env) (map[string]kinds.Instance, error) {
	found, err := noderuntime.FindRunningIn(env.Listed.Processes(), env.Store.ID, env.Plan.NetID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]kinds.Instance, len(found))
	for name, r := range found {
		in := kinds.Instance{Kind: Name, Name: name, PID: r.PID, Digest: r.Digest}
		if !r.Ready {
			in.Digest = NotReady // never the plan's: the reconciler stops it and starts it again
		}
		out[name] = in
	}
	return out, nil
}

// Start starts the node's init process with its files, then sets the node's sysctls (except
// those of interfaces that are link endpoints, which Port sets) and its loopback addresses.
func (Kind) Start(ctx context.Context, env *kinds.Env, n *plan.Node) (kinds.Instance, error) {
	cfg := noderuntime.Config{Hostname: n.Name}
	for _, f := range n.Files {
		cfg.Files = append(cfg.Files, noderuntime.File{Path: f.Path, Content: f.Content, Mode: f.Mode, Owner: f.Owner})
	}
	in := kinds.Instance{Kind: Name, Name: n.Name, Digest: n.Digest}
	base, err := env.Store.AllocUIDs(env.Plan.Network, kinds.UIDBases(env, noderuntime.UIDBases))
	if err != nil {
		return in, err
	}
	opt, release, err := etcTemplate(n, base)
	if err != nil {
		return in, err
	}
	defer release() // once noderuntime.Start has returned: the node's /etc is mounted
	if opt.Cgroup, err = createGroup(env, n); err != nil {
		return in, err
	}
	if n.Needs.Memory > 0 {
		// The private directories (one tmpfs) hold at most a quarter of the node's memory:
		// filled up, they leave room for the node's processes.
		cfg.TmpfsSize = max(n.Needs.Memory/4, 1<<20)
	}
	pid, err := noderuntime.Start(noderuntime.Marker(env.Store.ID, env.Plan.NetID, n.Name, n.Digest), cfg, opt)
	if err != nil {
		if opt.Cgroup != nil {
			opt.Cgroup.Remove()
		}
		return in, err
	}
	in.PID = pid
	ns, err := openNS(pid)
	if err != nil {
		return in, err
	}
	defer ns.Close()
	if err := ns.sysctl(n.NodeSysctls(env.Plan.Endpoints(n.Name))); err != nil {
		return in, err
	}
	if lo := n.Addresses["lo"]; len(lo) > 0 {
		link, err := ns.nl.LinkByName("lo")
		if err != nil {
			return in, fmt.Errorf("interface lo: %w", err)
		}
		if err := ns.addAddresses(link, lo); err != nil {
			return in, err
		}
	}
	return in, noderuntime.MarkReady(pid)
}

// etcTemplate holds (made once per network, and per root directory) the lower layer of node
// n's /etc: a copy of the host's /etc, or of its rootfs's.
func etcTemplate(n *plan.Node, base uint32) (opt noderuntime.Options, release func(), err error) {
	opt = noderuntime.Options{UIDBase: base, Rootfs: n.Rootfs}
	if n.Rootfs == "" {
		opt.Etc, release, err = noderuntime.EtcTemplate("/etc", base)
	} else {
		opt.Etc, release, err = noderuntime.RootfsEtcTemplate(n.Rootfs, base)
	}
	return opt, release, err
}

// End kills the node's init without waiting for it to be gone (Stop waits).
func (Kind) End(env *kinds.Env, in kinds.Instance) error {
	if err := noderuntime.Kill(in.PID); err != nil {
		return fmt.Errorf("ending node %s (pid %d): %w", in.Name, in.PID, err)
	}
	return nil
}

// Stop kills the node's init; the kernel ends every process of the node and frees its
// namespaces, and with them its ports. Stop returns once the init is gone.
func (Kind) Stop(ctx context.Context, env *kinds.Env, in kinds.Instance) error {
	if err := noderuntime.Kill(in.PID); err != nil {
		return fmt.Errorf("ending node %s (pid %d): %w", in.Name, in.PID, err)
	}
	if err := noderuntime.WaitGone(in.PID); err != nil {
		return err
	}
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return nil
	}
	if err != nil {
		return err
	}
	return h.Open(groupName(env, in.Name)).Remove()
}

// Exec runs the node's start commands in order, each through /bin/sh, with their output in the
// network's log directory. A command that fails is named in the error, with its output. A node
// of an image starts the image's entrypoint first when it is its main process (no exec:, or
// keep-entrypoint: true), as containerlab runs exec in a started container (mainProcess).
func (Kind) Exec(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node) error {
	main := n.Run != nil && n.Run.Main && len(n.Run.Argv) > 0
	if len(n.Exec) == 0 && !main {
		return nil
	}
	dir := env.Store.LogDir(env.Plan.Network)
	if err := os.MkdirAll(dir, state.DirMode); err != nil {
		return err
	}
	logPath := filepath.Join(dir, n.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, state.FileMode)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if main {
		if err := mainProcess(in.PID, n.Run, logFile, logPath); err != nil {
			return err
		}
	}
	for i, line := range n.Exec {
		fmt.Fprintf(logFile, "$ %s\n", line)
		cmd, err := noderuntime.CommandAs(in.PID, execEnv(n), "/bin/sh", "-c", line)
		if err != nil {
			return err
		}
		// A file, not a pipe: a daemon started here keeps its output open, and Wait must not
		// wait for that.
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("exec[%d] %q failed (%v); its output:\n%s", i, line, err, tail(logPath, 10))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
