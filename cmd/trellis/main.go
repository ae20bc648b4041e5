// Command trellis creates and manages virtual networks. See README.md.
package main

import (
	"fmt"
	"os"

	"github.com/trellisnet/trellis/internal/cli"
	"github.com/trellisnet/trellis/internal/engines"
	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/node"
)

func main() {
	// trellis re-executes itself as a node's init process and to run commands in nodes, and is
	// the agent in a VM node's guest.
	switch {
	case os.Getpid() == 1 && os.Args[0] == guest.InitPath: // a VM node's guest agent
		guest.Main()
	case os.Args[0] == node.InitArg0:
		node.InitMain()
	case os.Args[0] == engines.Arg0:
		engines.Main()
	case len(os.Args) > 2 && os.Args[1] == node.ExecArg && os.Args[2] == "--":
		node.ExecMain(os.Args[3:])
	}
	if err := cli.NewRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "trellis:", err)
		os.Exit(1)
	}
}
