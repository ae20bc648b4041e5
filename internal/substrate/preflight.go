package substrate

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// preflight refuses, before anything changes, a plan this machine cannot hold: kinds that are
// not registered, features its kernel lacks (kernel.go), and delays on a machine with no way
// to apply them.
func preflight(p *plan.Plan, n *spec.Network, opt Options) error {
	var errs spec.Errors
	for _, nd := range p.Nodes {
		if _, err := kinds.NodeKind(nd.Kind); err != nil {
			errs = append(errs, n.NodeError(nd.Node, "kind", err.Error(), "use a registered kind"))
		}
	}
	if p.Tunnel != "" {
		if _, err := kinds.TunnelKind(p.Tunnel); err != nil {
			errs = append(errs, n.NetworkError("tunnel", err.Error(), "use a registered tunnel kind"))
		}
	}
	errs = append(errs, kernelErrors(p, n, opt)...)
	for _, l := range p.Links {
		sl := specLink(n, l.Name)
		if _, err := kinds.LinkKind(l.Connector); err != nil {
			errs = append(errs, n.LinkError(sl, "connector", err.Error(), "use a registered connector"))
		}
	}
	errs = append(errs, checkDelays(p, n, opt)...)
	if len(errs) > 0 {
		return errs
	}
	return checkPrograms(p, n) // compiles: only for a plan otherwise fine
}

func specLink(n *spec.Network, name string) *spec.Link {
	for _, l := range n.Links {
		if l.Name == name {
			return l
		}
	}
	return nil
}

var (
	netemOnce sync.Once
	netemOK   bool
)

// netemAvailable tells whether the kernel has the netem qdisc, by trying it on a veth pair
// made for the purpose (and deleted again): nothing else on the machine is touched.
func netemAvailable() bool {
	netemOnce.Do(func() {
		name := fmt.Sprintf("trnetem%d", os.Getpid()%1000000)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
		if err := netlink.LinkAdd(veth); err != nil {
			return
		}
		defer netdev.Delete(name)
		dev, err := netlink.LinkByName(name)
		if err != nil {
			return
		}
		q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			netlink.NetemQdiscAttrs{Latency: 1000})
		netemOK = netlink.QdiscAdd(q) == nil
	})
	return netemOK
}

// prepare lets the node kinds the plan uses do what they need before their nodes start (see
// kinds.Preparer); a failure is refused as the first such node's kind.
func prepare(ctx context.Context, env *kinds.Env, n *spec.Network) error {
	done := map[string]bool{}
	for _, nd := range env.Plan.Nodes {
		if done[nd.Kind] {
			continue
		}
		done[nd.Kind] = true
		k, err := kinds.NodeKind(nd.Kind)
		if err != nil {
			return err
		}
		if p, ok := k.(kinds.Preparer); ok {
			if err := p.Prepare(ctx, env); err != nil {
				return spec.Errors{n.NodeError(nd.Node, "kind", err.Error(), "see docs/vm.md for what "+nd.Kind+" nodes need")}
			}
		}
	}
	return nil
}
