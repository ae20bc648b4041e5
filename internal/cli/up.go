package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/clab"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/progress"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

func upCmd(store storeFunc, mo *machineOptions) *cobra.Command {
	var (
		verbose bool
		host    string
		wait    time.Duration
		replug  bool
	)
	cmd := &cobra.Command{
		Use:   "up FILE",
		Short: "Create the virtual network declared in FILE, or change it live to match the file",
		Long: `Create the virtual network declared in the topology file FILE, or, if it is up, change it live
to match the file: only what differs is changed (see ` + "`trellis diff FILE`" + `). Nodes that are added
start, nodes that are removed stop, links that are added, removed or changed (rate, impairments,
state, MTU, connector, members) are changed in place, and every other node keeps running
untouched, its processes and routing adjacencies included. A node whose own settings changed
(kind, loopback addresses, sysctl, files, exec, limits, rootfs, image) restarts, alone; the addresses
of its link interfaces change live. A point-to-point link that names no connector is a direct
link (one veth pair, no port) while it has nothing to enforce; a rate, delay, tunnel or engines
give it the shortbridge's ports. A change that re-plugs a direct link to ports or back makes its
interfaces anew (the nodes see the carrier drop; up and diff say so): if they carry what the
nodes' software made (addresses not from the file, routes, rules, qdiscs), up refuses it and
changes nothing, unless --replug accepts the flap (it then says what went). A link that names
connector: shortbridge keeps its ports and is never re-plugged.

The file is checked before anything changes, and every problem in it is reported. If creating
fails half-way, what was created is removed again; if a live change fails, the network is taken
back to what it was. Ctrl-C stops cleanly: the next up (or down) completes the work. After a
crash or a reboot, up converges to the file again. On a terminal, a progress line shows how far
the current step is (nothing is drawn in pipes, files or CI).

FILE may also be a containerlab topology file (FILE.clab.yml or FILE.clab.yaml, or a file with a
top-level topology: key): what trellis can honour of it runs as the network, and every other key
is refused with its line and why (docs/containerlab.md; ` + "`trellis convert FILE`" + ` prints the
trellis file it amounts to).

A file with a hosts: section spreads the network over several machines: run up with the same
file on each of them. This machine is the host whose underlay address is configured here, or
the one --host names; it gets its nodes and its ends of the links that cross to other machines.

With --cluster, the file goes to the cluster's etcd instead (docs/cluster.md): the placer places
it on the registered machines, and up waits (--wait) until every machine's agent has converged;
it prints when the change was committed to etcd and when it converged, both counted from its
start. Two ups of one network at once: one wins, and the other either gets a conflict error and
changes nothing, or (if it read the network after the winner wrote it) commits after it and is
overtaken: the later up's generation replaces its own before it converges. A network that does
not fit is refused with the machine and resource that are short: a new one is not created, a
changed one keeps running as it was. If etcd does not answer within 4 s (it lost its quorum), up
stops with "etcd unreachable"; if its generation was already written, the error says so.

Exit status: 0 when done; 3 with --cluster when this up's generation was overtaken by another
up (or removed by a down) before it converged (the message names the generation the cluster goes
to); 1 for any other error (a conflict included: nothing was changed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				return clusterUp(cmd, cs, args[0], wait, start)
			}
			opt, err := mo.substrate()
			if err != nil {
				return err
			}
			n, st, host, err := loadFile(store, args[0], host)
			if err != nil {
				return err
			}
			log := io.Discard
			if verbose {
				log = cmd.ErrOrStderr()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			file, _ := filepath.Abs(args[0])
			var res *substrate.Result
			withProgress(cmd.ErrOrStderr(), log, func(log io.Writer) {
				opt.Replug, opt.Log = replug, logline.Logger(cmd.OutOrStdout(), log)
				res, err = substrate.Up(ctx, st, n, host, file, opt)
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case res.Created:
				fmt.Fprintf(out, "network %s is up%s: %d nodes, %d links (%.2fs)\n", n.Name, onHost(host), res.Nodes, res.Links, res.Took.Seconds())
			case len(res.Changes) > 0:
				fmt.Fprintf(out, "network %s changed%s (%.2fs):\n", n.Name, onHost(host), res.Took.Seconds())
				for _, c := range res.Changes {
					fmt.Fprintf(out, "  %s\n", c)
				}
			default:
				fmt.Fprintf(out, "network %s is up to date: nothing changed\n", n.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print how long each step took")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "with --cluster: how long to wait for every machine to converge")
	cmd.Flags().StringVar(&host, "host", "", "which of the file's hosts this machine is (default: the one whose address is configured here)")
	cmd.Flags().BoolVar(&replug, "replug", false, "re-plug direct links even if their interfaces carry what the nodes' software made (it goes)")
	return cmd
}

// loadFile reads and checks a topology file (trellis's, or containerlab's: internal/clab), opens
// the state directory and finds which of the file's hosts this machine is.
func loadFile(store storeFunc, path, host string) (*spec.Network, *state.Store, string, error) {
	n, err := clab.Load(path)
	if err != nil {
		return nil, nil, "", err
	}
	st, err := store()
	if err != nil {
		return nil, nil, "", err
	}
	if len(n.Hosts) > 0 && host == "" {
		if host, err = substrate.LocalHost(n); err != nil {
			return nil, nil, "", err
		}
	}
	return n, st, host, nil
}

// withProgress runs f with log, or on a terminal with a progress line on out that prints log's
// lines above it (internal/progress) and is cleared when f returns; in pipes and CI there is
// none.
func withProgress(out, log io.Writer, f func(log io.Writer)) {
	t := progress.New(out, log)
	if t == nil {
		f(log)
		return
	}
	defer t.Close()
	f(t)
}

func onHost(host string) string {
	if host == "" {
		return ""
	}
	return " on host " + host
}
