package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/oci"
	"github.com/trellisnet/trellis/internal/substrate"
)

// machineOptions are the machine's choices of how networks are made: flags of every command
// (persistent on the root), each defaulting to its environment variable, so that a script or CI
// that sets the variable keeps working. Only the command line reads these variables; the
// layers below take the values (substrate.Options, dataplane.Config).
type machineOptions struct {
	portHook, portNS, delay, egreRoute string
}

// addMachineFlags adds the machine's choices to root, read from the environment as defaults.
func addMachineFlags(root *cobra.Command) *machineOptions {
	o := &machineOptions{}
	f := root.PersistentFlags()
	f.StringVar(&o.portHook, "port-hook", os.Getenv(dataplane.HookEnv),
		"where ports' eBPF programs run: clsact (when empty), tcx (Linux 6.6), or auto (tcx where the kernel has it); default $"+dataplane.HookEnv)
	f.StringVar(&o.portNS, "port-netns", os.Getenv(substrate.PortNSEnv),
		"where a new network's ports live: root (when empty), auto (a namespace of the network's own where it can: a network with a tunnel, delay, engines, an eBPF data plane or VMs has them in the root; one in its namespace refuses a live delay) or network (refusing a network that cannot); default $"+substrate.PortNSEnv)
	f.StringVar(&o.delay, "delay", os.Getenv(substrate.DelayEnv),
		"how delays are applied: netem where the kernel has it, else trellis's delay line (when empty); line; or netem, refusing a kernel without it; default $"+substrate.DelayEnv)
	f.StringVar(&o.egreRoute, "egre-route", os.Getenv(dataplane.EncapRouteEnv),
		"how EGRE encapsulation finds the underlay route: template (when empty: looked up once a second) or per-frame; default $"+dataplane.EncapRouteEnv)
	return o
}

// registryMirrors are the mirrors that $TRELLIS_REGISTRY_MIRRORS lists (comma separated).
func registryMirrors() []string {
	var out []string
	for _, m := range strings.Split(os.Getenv(oci.MirrorsEnv), ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// substrate returns the options of the substrate (and the data plane below it) that o chose,
// with the image cache and registry mirrors of the environment.
func (o *machineOptions) substrate() (substrate.Options, error) {
	switch o.egreRoute {
	case "", "template", "per-frame":
	default:
		return substrate.Options{}, fmt.Errorf("--egre-route (or $%s) %q: use template or per-frame", dataplane.EncapRouteEnv, o.egreRoute)
	}
	return substrate.Options{PortNS: o.portNS, Delay: o.delay,
		Dataplane:  dataplane.Config{PortHook: o.portHook, PerFrameRoute: o.egreRoute == "per-frame"},
		ImageCache: os.Getenv(image.CacheEnv), Mirrors: registryMirrors()}, nil
}
