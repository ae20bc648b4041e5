// Package cli is the `trellis` command line: it reads the user's words and calls the spec,
// plan and substrate layers. It holds no network logic of its own.
package cli

import (
	"github.com/spf13/cobra"
	_ "github.com/trellisnet/trellis/internal/kinds/all" // the kinds the files may name
	"github.com/trellisnet/trellis/internal/state"
)

// NewRoot returns the trellis command with all its sub-commands.
func NewRoot() *cobra.Command {
	var stateDir string
	root := &cobra.Command{
		Use:   "trellis",
		Short: "Run many fast, isolated virtual networks on one Linux machine",
		Long: `Trellis runs virtual networks: nodes (containers built from Linux namespaces, each with
its own interfaces, routes and forwarding tables) joined by Ethernet links, declared in one
topology file. Many networks run side by side and may reuse names and addresses.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&stateDir, "state-dir", state.DefaultDir, "directory where trellis records what it creates")
	addClusterFlag(root)
	mo := addMachineFlags(root)
	root.PersistentPreRunE = checkClusterVerb
	store := func() (*state.Store, error) { return state.Open(stateDir) }
	root.AddCommand(upCmd(store, mo), diffCmd(store, mo), downCmd(store), convertCmd(), lsCmd(store), inspectCmd(store), execCmd(store), linkCmd(store, mo), serveCmd(store, mo), captureCmd(store))
	root.AddCommand(imageCmd(), agentCmd(store, mo), placerCmd(), tenantCmd(), machineCmd(), certCmd())
	root.AddCommand(tableCmd(store))
	return root
}

type storeFunc func() (*state.Store, error)
