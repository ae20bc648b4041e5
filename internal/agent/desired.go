package agent

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/spec"
)

// LocalName is the name a tenant's network has in a machine's state directory: TENANT.NETWORK.
// No network of one machine has such a name (theirs have no dot), so the agent's networks and
// those of `trellis up` on the machine never mix, and two tenants' networks of one name differ
// (in device names, MACs and tunnel keys, which all derive from it).
func LocalName(tenant, network string) string { return tenant + "." + network }

// Source is what a machine's record of a tenant's network says it came from: the network's key
// in etcd and its generation (etcd:/trellis/v1/networks/TENANT/NETWORK@GENERATION). The agent
// applies a generation again with substrate.UpKeepLive, which keeps the live state of a record
// of the same source.
func Source(tenant, network string, generation int64) string {
	return fmt.Sprintf("etcd:%s@%d", cluster.NetworkKey(tenant, network), generation)
}

// splitLocal returns the tenant and network of a local name made by LocalName.
func splitLocal(name string) (tenant, network string, ok bool) {
	return strings.Cut(name, ".")
}

// Desired is the network an agent converges its machine to: the topology file of n, parsed as
// every machine parses it, named LocalName, with the placement's machines as its hosts and every
// node pinned where the placement puts it, so that each machine's plan holds its nodes and the
// tunnels to the others.
func Desired(n *cluster.Network, p *cluster.Placement) (*spec.Network, error) {
	read := func(path string) ([]byte, error) {
		if s, ok := n.Sources[path]; ok {
			return []byte(s), nil
		}
		return nil, fmt.Errorf("%w: the network as stored in etcd has no copy of it", os.ErrNotExist)
	}
	sn, err := spec.ParseCluster(n.File, []byte(n.Source), read)
	if err != nil {
		return nil, err
	}
	sn.Name = LocalName(n.Tenant, n.Name)
	// A placement of an older placer has no secret: its keys derive from the names, as before.
	if sn.TunnelSecret, err = hex.DecodeString(p.Secret); err != nil {
		return nil, fmt.Errorf("placement of %s, generation %d: secret: %w", n.Name, p.Generation, err)
	}
	machines := make([]string, 0, len(p.Machines))
	for m := range p.Machines {
		machines = append(machines, m)
	}
	sort.Strings(machines) // every machine lists them in the same order
	for _, m := range machines {
		u := p.Machines[m]
		mtu := u.MTU
		if mtu == 0 {
			mtu = spec.DefaultUnderlayMTU
		}
		sn.Hosts = append(sn.Hosts, &spec.Host{Name: m, Address: u.Address, MTU: mtu})
	}
	for _, l := range sn.Links {
		l.TunnelKey = p.Keys[l.Name]
	}
	var errs []error
	for _, nd := range sn.Nodes {
		m, ok := p.Nodes[nd.Name]
		if _, known := p.Machines[m]; !ok || !known {
			errs = append(errs, fmt.Errorf("placement of %s, generation %d: node %s is on machine %q, which it gives no address", n.Name, p.Generation, nd.Name, m))
		}
		nd.Host = m
	}
	return sn, errors.Join(errs...)
}
