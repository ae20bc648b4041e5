package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/node"
)

func execCmd(store storeFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "exec NETWORK NODE [-- COMMAND [ARG...]]",
		Short: "Run a command inside a node (a shell if no command is given)",
		Long: `Run a command inside a node: in its network, mount, UTS, IPC and PID namespaces, with its
reduced capabilities. With no command it opens a shell. Standard input, output and the terminal
are the caller's, so an interactive command works as it would outside. The exit code is the
command's.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			running, err := node.Find(st.ID, rec.NetID)
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
				if _, err := os.Stat("/bin/bash"); err != nil {
					argv = []string{"/bin/sh"}
				}
			}
			c, err := node.Command(pid, argv...)
			if err != nil {
				return err
			}
			// Become nsenter: the terminal, signals and exit code pass through untouched.
			return syscall.Exec(c.Path, c.Args, c.Env)
		},
	}
}
