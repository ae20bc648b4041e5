// Command trellis creates and manages virtual networks. See README.md.
package main

import (
	"fmt"
	"os"

	"github.com/trellisnet/trellis/internal/cli"
	"github.com/trellisnet/trellis/internal/delay"
	"github.com/trellisnet/trellis/internal/enginehelper"
	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/tablesock"
)

func main() {
	// trellis re-executes itself as a node's forwarding engines helper, as a port's delay line
	// (internal/delay), as a programmable node's table server (internal/tablesock) and to join
	// a node's control groups, and is the agent in a VM node's guest. (A node's init is a
	// program of its own, internal/noderuntime/nodeinit.)
	switch {
	case os.Getpid() == 1 && os.Args[0] == guest.InitPath: // a VM node's guest agent
		guest.Main(enginehelper.ServeGuest)
	case os.Args[0] == enginehelper.Arg0:
		enginehelper.Main()
	case os.Args[0] == delay.LineArg0:
		delay.LineMain()
	case os.Args[0] == tablesock.Arg0:
		tablesock.Main()
	case len(os.Args) > 1 && os.Args[1] == noderuntime.JoinArg:
		noderuntime.JoinMain(os.Args[2:])
	}
	if err := cli.NewRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "trellis:", err)
		os.Exit(cli.ExitStatus(err))
	}
}
