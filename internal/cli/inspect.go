package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/substrate"
)

func inspectCmd(store storeFunc) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect NETWORK",
		Short: "Show a network's nodes, interfaces and links, read live from the kernel",
		Long: `Show a network's nodes (with their init pid), each node's interfaces with addresses, MAC
and MTU, and each link with its connector, rate and the packets and bytes each endpoint sent (tx)
and received (rx), and the frames its shaper dropped (a direct link, connector veth: one veth pair
with no port, its counters those of the nodes' interfaces); for a LAN connector (connector lan), its
learnt forwarding table (address, member, idle time) and counters. With --cluster: the network's generation,
which machine holds each node, and what each machine's agent reports.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				return clusterInspect(cmd, cs, args[0], asJSON)
			}
			st, err := store()
			if err != nil {
				return err
			}
			info, err := substrate.Inspect(st, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return printInfo(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printInfo(out io.Writer, info *substrate.NetworkInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "network %s (id %s, %s) from %s\n", info.Name, info.NetID, info.Status, info.File)
	if info.Host != "" {
		fmt.Fprintf(w, "this machine is host %s; links to other hosts use %s tunnels\n", info.Host, info.Tunnel)
	}
	fmt.Fprintf(w, "\nNODE\tPID\tINTERFACE\tMAC\tMTU\tSTATE\tADDRESSES\n")
	for _, n := range info.Nodes {
		if !n.Running {
			fmt.Fprintf(w, "%s\t-\t(not running)\n", n.Name)
		}
		for _, i := range n.Interfaces {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%s\t%s\n", n.Name, n.PID, i.Name, i.MAC, i.MTU, i.State, strings.Join(i.Addresses, " "))
		}
	}
	printUsage(w, info)
	fmt.Fprintf(w, "\nLINK\tCONNECTOR\tRATE\tMTU\tENDPOINT\tPORT\tTX PKTS\tTX BYTES\tRX PKTS\tRX BYTES\tDROPS\n")
	for _, l := range info.Links {
		rate := l.Rate
		if rate == "" {
			rate = "-"
		}
		for _, e := range l.Endpoints {
			port := e.Port
			if port == "" {
				port = "-" // a direct link: one veth pair between the nodes
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s:%s\t%s\t%d\t%d\t%d\t%d\t%d\n", l.Name, l.Connector, rate, l.MTU,
				e.Node, e.Interface, port, e.TxPackets, e.TxBytes, e.RxPackets, e.RxBytes, e.Drops)
		}
	}
	printTunnels(w, info)
	printLANs(w, info)
	printThreads(w, info)
	printEngines(w, info)
	return w.Flush()
}

// printThreads lists the host threads of VM nodes: where they run and how they are scheduled.
func printThreads(w io.Writer, info *substrate.NetworkInfo) {
	header := false
	for _, n := range info.Nodes {
		if len(n.Threads) == 0 && len(n.Notes) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nNODE\tKIND\tTHREAD\tTID\tCPU\tAFFINITY\tPOLICY\tPRIORITY\n")
			header = true
		}
		for _, note := range n.Notes {
			fmt.Fprintf(w, "%s\t%s\t(%s)\n", n.Name, n.Kind, note)
		}
		for _, t := range n.Threads {
			policy := t.Policy
			if t.Reserve != "" {
				policy += " " + t.Reserve
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\n", n.Name, n.Kind, t.Name, t.TID, t.CPU, t.Affinity, policy, t.Priority)
		}
	}
}

// printEngines shows the forwarding engines of the nodes that have them.
func printEngines(w io.Writer, info *substrate.NetworkInfo) {
	header := false
	for _, n := range info.Nodes {
		e := n.Engines
		if e == nil {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nNODE\tENGINE\tDISPATCH\tCLASSIFIED\tRX PKTS\tTX PKTS\tCPUS\n")
			header = true
		}
		if e.PID == 0 {
			fmt.Fprintf(w, "%s\t(engines not running: run trellis up)\n", n.Name)
			continue
		}
		fmt.Fprintf(w, "%s\tcontrol\t%s\t%d\t-\t-\t-\n", n.Name, e.Dispatch, e.ToControl)
		for _, fe := range e.Engines {
			fmt.Fprintf(w, "%s\tfe%d\t%s\t%d\t%d\t%d\t%s\n", n.Name, fe.Index, e.Dispatch, fe.Classified, fe.RxPackets, fe.TxPackets, engineCPUs(fe))
		}
		if len(e.Engines) > 0 && e.Engines[0].VM { // routes only, through the VMs' agents
			fmt.Fprintf(w, "%s\tmirror\t%d routes copied from the node's VM; %d errors; last %dus, max %dus\n", n.Name,
				e.Mirror.Routes, e.Mirror.Errors, e.Mirror.LastMicros, e.Mirror.MaxMicros)
			continue
		}
		fmt.Fprintf(w, "%s\tmirror\t%d routes, %d neighbours, %d addresses copied; %d errors; last %dus, max %dus\n", n.Name,
			e.Mirror.Routes, e.Mirror.Neighbours, e.Mirror.Addresses, e.Mirror.Errors, e.Mirror.LastMicros, e.Mirror.MaxMicros)
	}
}

// engineCPUs shows an engine's cores, and the share they were given for: "0,1" or "1 (0.5)".
func engineCPUs(fe substrate.EngineInfo) string {
	var cpus []string
	for _, c := range fe.CPUs {
		cpus = append(cpus, strconv.Itoa(c))
	}
	out := strings.Join(cpus, ",")
	if out == "" {
		out = "any"
	}
	if fe.Share > 0 {
		out += fmt.Sprintf(" (%g)", fe.Share)
	}
	if fe.Host != "" {
		out += " on " + fe.Host
	}
	switch {
	case fe.Down && fe.VM:
		out += " (down: its VM is gone)"
	case fe.Down:
		out += " (down: not reached)"
	}
	return out
}

func printTunnels(w io.Writer, info *substrate.NetworkInfo) {
	header := false
	for _, l := range info.Links {
		for _, t := range l.Tunnels {
			if !header {
				fmt.Fprintf(w, "\nLINK\tTO HOST\tREMOTE\tKEY\tDEVICE\n")
				header = true
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%#08x\t%s\n", l.Name, t.Host, t.Remote, t.Key, t.Device)
		}
	}
	if c := info.EGRE; c != nil {
		fmt.Fprintf(w, "\nEGRE on this machine (all networks): %d frames decapsulated; dropped: %d unknown key, %d wrong source, %d errors\n",
			c.Decapsulated, c.UnknownKey, c.WrongSource, c.Errors)
	}
}

// printUsage prints what each running node uses, from its control group.
func printUsage(w io.Writer, info *substrate.NetworkInfo) {
	fmt.Fprintf(w, "\nNODE\tCPU TIME\tMEMORY\tPROCESSES\tOOM KILLS\n")
	for _, n := range info.Nodes {
		if u := n.Usage; u != nil {
			fmt.Fprintf(w, "%s\t%.2fs\t%.1fM\t%d\t%d\n", n.Name, u.CPUSeconds, float64(u.Memory)/(1<<20), u.Processes, u.OOMKills)
		}
	}
}

// printLANs shows the learnt table and the counters of each LAN connector.
func printLANs(w io.Writer, info *substrate.NetworkInfo) {
	for _, l := range info.Links {
		lan := l.LAN
		if lan == nil {
			continue
		}
		fmt.Fprintf(w, "\nLAN %s: %d of %d addresses learnt, ageing %gs; %d unicast, %d flooded, %d filtered, %d learnt or moved\n",
			l.Name, len(lan.Entries), lan.Table, lan.Ageing, lan.Counters.Unicast, lan.Counters.Flooded, lan.Counters.Filtered, lan.Counters.Learnt)
		if lan.Error != "" {
			fmt.Fprintf(w, "  (table not read: %s)\n", lan.Error)
			continue
		}
		if len(lan.Entries) > 0 {
			fmt.Fprintf(w, "MAC\tMEMBER\tIDLE\n")
		}
		for _, e := range lan.Entries {
			fmt.Fprintf(w, "%s\t%s\t%.1fs\n", e.MAC, e.Member, e.Idle)
		}
	}
}
