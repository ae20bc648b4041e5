package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/clab"
	"gopkg.in/yaml.v3"
)

func convertCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "convert FILE.clab.yml",
		Short: "Print the trellis topology file that a containerlab topology file amounts to",
		Long: `Print, on standard output, the trellis topology file that the containerlab topology file FILE
amounts to: what ` + "`trellis up FILE`" + ` runs. Its files' source: paths are relative to FILE's
directory: save it there. Every key trellis cannot honour is refused with its line and why, and
nothing is printed (docs/containerlab.md). A key that this build of trellis has no node key for
yet (such as image:) is written as trellis will name it, with a note on standard error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("reading topology file: %w", err)
			}
			text, notes, err := clab.Convert(args[0], data)
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			_, err = cmd.OutOrStdout().Write(text)
			return err
		},
	}
}

// networkName returns the network an argument of down names: itself, or, for a topology file
// (an argument with a '.' or a '/', which no network's name has), the file's `name:`.
//
// An argument without a '/' for which isRecord (if given) is true is that network's name:
// it names a record of the state directory (a cluster machine's TENANT.NETWORK).
func networkName(arg string, isRecord func(string) bool) (string, error) {
	if !strings.ContainsAny(arg, "./") || !strings.Contains(arg, "/") && isRecord != nil && isRecord(arg) {
		return arg, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", fmt.Errorf("%s is not a network's name (names have no '.' or '/'), nor a topology file: %w", arg, err)
	}
	var head struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil || head.Name == "" {
		return "", errors.New(arg + ": a topology file without a name: give the network's name instead")
	}
	return head.Name, nil
}

// networkNames replaces each of args by the network it names (networkName).
func networkNames(args []string, isRecord func(string) bool) error {
	for i, arg := range args {
		name, err := networkName(arg, isRecord)
		if err != nil {
			return err
		}
		args[i] = name
	}
	return nil
}
