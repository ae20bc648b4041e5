package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/substrate"
)

func tableCmd(store storeFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "table NETWORK NODE [MAP [get KEY | set KEY VALUE | del KEY | dump]]",
		Short: "List, read and write the tables (maps) of a node's dataplane program",
		Long: `A node with ` + "`dataplane: {program: FILE}`" + ` forwards with its own eBPF program, whose
maps are its tables (docs/ebpf-nodes.md). With NETWORK NODE alone: list them, with their type
and the sizes of their keys and values in bytes. With MAP (or MAP dump): print every entry,
key and value in hex. get KEY prints the value of one key; set KEY VALUE writes it; del KEY
removes it. Keys and values are hex bytes in memory order, exactly as long as the table's
keys and values ("0a000201", or with separators: "0a:00:02:01", "0x0a000201"); a number the
program reads as a __u32 is little-endian on x86 and arm64 (port 2: 02000000). The tables
trellis fills itself (trellis_ports, trellis_port_of) are read-only. Example
(examples/ebpf/l3): the route to 10.0.2.0/24, an LPM key {__u32 prefixlen; __u8 addr[4]},
through port 2 to 02:aa:bb:cc:dd:ee, a value {__u8 mac[6]; __u16 port}:
  trellis table ebpf-l3 s1 routes set 18000000.0a000200 02aabbccddee.0200
The same operations are offered by the HTTP API (trellis serve), the Python package, and, to
a process of the node's root, the socket @trellis/tables inside the node.`,
		Args: tableArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store()
			if err != nil {
				return err
			}
			u, err := substrate.NodeProgram(st, args[0], args[1])
			if err != nil {
				return err
			}
			defer u.Close()
			out := cmd.OutOrStdout()
			if len(args) == 2 {
				return listTables(out, u.Tables())
			}
			return tableVerb(out, u, args[2], args[3:])
		},
	}
}

func tableArgs(cmd *cobra.Command, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("give NETWORK NODE, and a MAP with get KEY, set KEY VALUE, del KEY or dump")
	}
	want := map[string]int{"get": 5, "set": 6, "del": 5, "dump": 4}
	if len(args) <= 3 {
		return nil
	}
	n, ok := want[args[3]]
	if !ok {
		return fmt.Errorf("%q: give get KEY, set KEY VALUE, del KEY or dump", args[3])
	}
	if len(args) != n {
		return fmt.Errorf("table %s %s takes %d argument(s) after it", args[2], args[3], n-4)
	}
	for _, a := range args[4:] {
		if _, err := dataplane.ParseHex(a); err != nil {
			return err
		}
	}
	return nil
}

func listTables(out io.Writer, tables []dataplane.Table) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tTYPE\tKEY\tVALUE\tMAX ENTRIES\t")
	for _, t := range tables {
		ro := ""
		if t.ReadOnly {
			ro = "read-only"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", t.Name, t.Type, t.KeySize, t.ValueSize, t.MaxEntries, ro)
	}
	return tw.Flush()
}

func tableVerb(out io.Writer, u *dataplane.UserProgram, table string, args []string) error {
	r := dataplane.TableRequest{Op: dataplane.OpDump, Table: table}
	if len(args) > 0 {
		r.Op = args[0]
	}
	if len(args) > 1 {
		r.Key = args[1]
	}
	if len(args) > 2 {
		r.Value = args[2]
	}
	reply, err := u.Do(r)
	if err != nil {
		return err
	}
	if r.Op == dataplane.OpGet {
		fmt.Fprintln(out, reply.Value)
	}
	for _, e := range reply.Entries {
		fmt.Fprintf(out, "%s %s\n", e.Key, e.Value)
	}
	return nil
}
