package cli

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/oci"
)

func imageCmd() *cobra.Command {
	cache := image.CacheOr(os.Getenv(image.CacheEnv))
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build, import, list and remove the guest images VM nodes boot and the container images nodes run",
		Long: `VM nodes (kind: vm) boot a small guest image that trellis builds from the host: Debian's
linux-image-amd64 kernel (downloaded once through apt), the trellis binary as the guest's agent,
busybox, and the host's ip, ping, BIRD, iperf3 and tcpdump with their libraries; for nodes that
run FRR (their exec or files name frr or vtysh), the same with the host's FRR. Images are kept
in the cache under an ID made from their contents; 'trellis up' builds the image when an input
changed (e.g. BIRD was upgraded), so building ahead only saves time. A new image makes it remove
all but the three newest, except those a running trellis holds (an up until it exits, a serve
while it runs); 'image rm' refuses those.

Container images (a node's image: REF, docs/images.md) are pulled by 'up' (or 'image pull'), or
imported from a 'docker save' archive, an OCI archive or an OCI layout directory ('image import');
each is unpacked once, under its config digest, and shared by every node that runs it. 'image rm'
and 'image prune' never remove one in use: by a running node, or by a trellis starting nodes
from it.`,
	}
	cmd.PersistentFlags().StringVar(&cache, "cache", cache, "where images and kernels are kept (up uses $"+image.CacheEnv+", or "+image.DefaultCache+")")
	frr := false
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the default guest image (or find it in the cache)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := image.DefaultSpec()
			s.FRR = frr
			img, err := image.Build(cmd.Context(), cache, s, logline.Logger(nil, os.Stderr))
			if err != nil {
				return err
			}
			fmt.Printf("%s kernel %s, %.1f MiB, in %s\n", img.ID, img.Release, float64(img.Size)/(1<<20), img.Dir)
			return nil
		},
	}
	build.Flags().BoolVar(&frr, "frr", false, "the image for nodes that run FRR: with the host's FRR (Debian's frr package)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the cached guest images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			imgs, err := image.List(cache)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKERNEL\tFRR\tSIZE\tBUILT")
			for _, img := range imgs {
				frr := map[bool]string{true: "yes", false: "no"}[img.FRR]
				fmt.Fprintf(w, "%s\t%s\t%s\t%.1f MiB\t%s\n", img.ID, img.Release, frr, float64(img.Size)/(1<<20), img.Built.Format("2006-01-02 15:04"))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return listContainerImages(oci.NewStore(cache))
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID|REF...",
		Short: "Remove cached guest images and container images (by ID or reference)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				err := image.Remove(cache, id)
				if errors.Is(err, image.ErrNoImage) {
					err = oci.NewStore(cache).Remove(id)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.AddCommand(build, ls, rm, importCmd(&cache), pullCmd(&cache), pruneCmd(&cache))
	return cmd
}
