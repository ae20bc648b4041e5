package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/state"
	"golang.org/x/term"
)

func execCmd(store storeFunc) *cobra.Command {
	var stdin bool
	cmd := &cobra.Command{
		Use:   "exec NETWORK NODE [-- COMMAND [ARG...]]",
		Short: "Run a command inside a node (a shell if no command is given)",
		Long: `Run a command inside a node: in its network, mount, UTS, IPC and PID namespaces, with its
reduced capabilities. With no command it opens a shell. Standard input and output are the
caller's; on a terminal the command runs on a pseudo-terminal of the node's own, relayed to the
caller's (size and signals too), so an interactive command works as it would outside, and
nothing in the node ever holds the caller's terminal. The exit code is the command's.

In a VM node (kind: vm) the command runs through the guest's agent. With a terminal it runs on
a terminal in the guest (a shell if no command is given), as in a container. Without one it
runs to its end, then its output shows, and it gets standard input only with -i (read to its
end first).

With --cluster (docs/cluster.md): the command runs through the agent of the machine that
holds the node, over mutual TLS with the context file's certificate; the agent runs it only
for the tenant that owns the network. It runs without a terminal, to its end (60 s at most),
then its output shows; -i passes standard input.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				return clusterExec(cmd, cs, args[0], args[1], args[2:], stdin)
			}
			st, err := store()
			if err != nil {
				return err
			}
			rec, err := st.Load(args[0])
			if err != nil {
				return err
			}
			if rec == nil {
				return fmt.Errorf("no network named %s in %s", args[0], st.Dir)
			}
			if done, err := runThroughKind(cmd, st, rec, args[1], args[2:], stdin); done || err != nil {
				return err
			}
			running, err := noderuntime.Find(st.ID, rec.NetID)
			if err != nil {
				return err
			}
			pid, ok := running[args[1]]
			if !ok {
				return fmt.Errorf("network %s has no running node %s", args[0], args[1])
			}
			argv := args[2:]
			if len(argv) == 0 {
				argv = []string{"/bin/bash"}
				if !noderuntime.HasProgram(pid, "/bin/bash") { // a node with `rootfs:` may lack it
					argv = []string{"/bin/sh"}
				}
			}
			c, err := noderuntime.Command(pid, argv...)
			if err != nil {
				return err
			}
			// Become the command (noderuntime.Command: JoinMain, then the enter program): the terminal,
			// signals and exit code pass through.
			return syscall.Exec(c.Path, c.Args, c.Env)
		},
	}
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass standard input to a command in a VM node (containers always get it)")
	return cmd
}

// runThroughKind runs argv in the node through its kind when the kind runs commands itself (a
// VM's guest agent), and exits with the command's code; done is false for other kinds.
func runThroughKind(cmd *cobra.Command, st *state.Store, rec *state.Record, name string, argv []string, withStdin bool) (done bool, err error) {
	if rec.Plan == nil {
		return false, nil
	}
	nd := rec.Plan.Node(name)
	if nd == nil {
		return false, nil
	}
	k, err := kinds.NodeKind(nd.Kind)
	if err != nil {
		return false, err
	}
	runner, ok := k.(kinds.Runner)
	if !ok {
		return false, nil
	}
	terminal, _ := k.(kinds.Terminal)
	env := &kinds.Env{Store: st, Plan: rec.Plan}
	running, err := k.Running(env)
	if err != nil {
		return true, err
	}
	in, ok := running[name]
	if !ok {
		return true, fmt.Errorf("network %s has no running node %s", rec.Name, name)
	}
	if terminal != nil && term.IsTerminal(int(os.Stdin.Fd())) {
		if len(argv) == 0 {
			argv = []string{"/bin/bash", "-l"}
		}
		code, err := attach(cmd.Context(), terminal, env, in, argv)
		if err != nil {
			return true, err
		}
		os.Exit(code)
	}
	if len(argv) == 0 {
		return true, fmt.Errorf("node %s is a %s: give the command to run (a shell needs a terminal)", name, nd.Kind)
	}
	var stdin io.Reader
	if withStdin {
		stdin = os.Stdin
	}
	code, err := runner.Run(cmd.Context(), env, in, argv, stdin, os.Stdout, os.Stderr)
	if err != nil {
		return true, err
	}
	os.Exit(code)
	return true, nil
}

// attach runs argv on a terminal in the node, with this terminal in raw mode, passing its size
// and its changes of size.
func attach(ctx context.Context, t kinds.Terminal, env *kinds.Env, in kinds.Instance, argv []string) (int, error) {
	fd := int(os.Stdin.Fd())
	size := func() [2]uint16 {
		cols, rows, err := term.GetSize(fd)
		if err != nil {
			return [2]uint16{24, 80}
		}
		return [2]uint16{uint16(rows), uint16(cols)}
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return 0, err
	}
	defer term.Restore(fd, old)
	resize := make(chan [2]uint16, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			select {
			case resize <- size():
			default:
			}
		}
	}()
	code, err := t.Attach(ctx, env, in, argv, size(), os.Stdin, os.Stdout, resize)
	term.Restore(fd, old)
	return code, err
}
