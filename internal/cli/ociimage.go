package cli

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/oci"
)

// The container image sub-commands of `trellis image` (package oci).

func importCmd(cache *string) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE|DIR",
		Short: "Import container images from a `docker save` archive, an OCI archive or an OCI layout directory",
		Long: `Import the container images of FILE, a 'docker save' archive (their repository tags name them)
or an OCI archive, or of DIR, an OCI layout directory (their org.opencontainers.image.ref.name
annotations name them): each is unpacked into the cache, and a node's image: REF then runs it
without any registry.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			imgs, err := oci.NewStore(*cache).Import(cmd.Context(), args[0])
			for _, img := range imgs {
				printImage(img)
			}
			return err
		},
	}
}

func pullCmd(cache *string) *cobra.Command {
	return &cobra.Command{
		Use:   "pull REF",
		Short: "Pull a container image from its registry (again) and unpack it",
		Long: `Pull container image REF from its registry, with the credentials of the docker config file
($DOCKER_CONFIG/config.json, else ~/.docker/config.json, and its credential helpers), Docker Hub
images through the mirrors of $` + oci.MirrorsEnv + ` first. 'up' pulls an image only when the
cache has none of that reference; pull fetches it again (e.g. a tag that moved).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store := oci.NewStore(*cache)
			store.Mirrors = registryMirrors()
			img, err := store.Pull(cmd.Context(), args[0], logline.Logger(nil, cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			printImage(img)
			return nil
		},
	}
}

func pruneCmd(cache *string) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove every container image no node runs and no trellis holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gone, err := oci.NewStore(*cache).Prune()
			var freed int64
			for _, img := range gone {
				freed += img.Size
				fmt.Printf("removed %s %s\n", oci.ShortID(img.ID), strings.Join(img.Refs, " "))
			}
			fmt.Printf("%d container images removed, %.1f MiB freed\n", len(gone), float64(freed)/(1<<20))
			return err
		},
	}
}

func printImage(img oci.Image) {
	fmt.Printf("%s %s, %.1f MiB, unpacked in %.2fs, in %s\n", oci.ShortID(img.ID), strings.Join(img.Refs, " "),
		float64(img.Size)/(1<<20), img.Took.Seconds(), img.Root())
}

func listContainerImages(s oci.Store) error {
	imgs, err := s.List()
	if err != nil || len(imgs) == 0 {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nCONTAINER IMAGE\tREFERENCES\tSIZE\tNODES\tUNPACKED")
	for _, img := range imgs {
		fmt.Fprintf(w, "%s\t%s\t%.1f MiB\t%d\t%s\n", oci.ShortID(img.ID), strings.Join(img.Refs, " "),
			float64(img.Size)/(1<<20), len(oci.NodesUsing(img.Root())), img.Unpacked.Format("2006-01-02 15:04"))
	}
	return w.Flush()
}
