package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
)

// agentOf returns the placement of the tenant's network and a client of its agents, with the
// context file's certificate.
func (cs *clusterSession) agentOf(ctx context.Context, network string) (*cluster.Placement, *agent.Client, error) {
	p, err := cs.store.Placement(ctx, cs.tenant, network)
	if errors.Is(err, cluster.ErrNotFound) {
		return nil, nil, fmt.Errorf("tenant %s has no network %s placed in the cluster (trellis --cluster FILE ls lists them)", cs.tenant, network)
	}
	if err != nil {
		return nil, nil, err
	}
	tc, err := cs.cc.Config().TLS.ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	return p, agent.NewClient(tc), nil
}

// endpointOf is the endpoint of the agent of machine m of placement p.
func endpointOf(p *cluster.Placement, m string) (string, error) {
	u, ok := p.Machines[m]
	if !ok || u.Endpoint == "" {
		return "", fmt.Errorf("the agent of machine %s serves no endpoint for exec and link (start it with --listen)", m)
	}
	return u.Endpoint, nil
}

// clusterExec runs argv in a node through the agent of the machine that holds it, prints what
// it wrote and exits with its code.
func clusterExec(cmd *cobra.Command, cs *clusterSession, network, node string, argv []string, withStdin bool) error {
	if len(argv) == 0 {
		return errors.New("with --cluster, give the command after -- (a shell needs a terminal, which exec through an agent has not)")
	}
	ctx := cmd.Context()
	p, client, err := cs.agentOf(ctx, network)
	if err != nil {
		return err
	}
	m, ok := p.Nodes[node]
	if !ok {
		return fmt.Errorf("network %s has no node %s (nodes: %s)", network, node, strings.Join(sortedKeys(p.Nodes), ", "))
	}
	ep, err := endpointOf(p, m)
	if err != nil {
		return err
	}
	req := &agent.ExecRequest{Tenant: cs.tenant, Network: network, Node: node, Argv: argv}
	if withStdin {
		in, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return err
		}
		req.Stdin = string(in)
	}
	res, err := client.Exec(ctx, ep, req)
	if err != nil {
		return err
	}
	io.WriteString(cmd.OutOrStdout(), res.Stdout)
	io.WriteString(cmd.ErrOrStderr(), res.Stderr)
	if res.TimedOut {
		return fmt.Errorf("node %s on %s: the command ran past %v and was killed", node, m, agent.DefaultExecTimeout)
	}
	if res.ExitCode != 0 {
		os.Exit(res.ExitCode)
	}
	return nil
}

// clusterLink takes a link's carrier away or gives it back, through the agent of every machine
// that holds an endpoint of it (or the one of --endpoint NODE:IF).
func clusterLink(cmd *cobra.Command, cs *clusterSession, args []string, endpoint string) error {
	if len(args) != 3 || (args[2] != "up" && args[2] != "down") {
		return errors.New("with --cluster, give NETWORK LINK up|down (listing and set work on a machine's own networks only)")
	}
	ctx := cmd.Context()
	network, link := args[0], args[1]
	_, sn, err := cs.current(ctx, network)
	if err != nil {
		return err
	}
	if sn == nil {
		return fmt.Errorf("tenant %s has no network %s in the cluster", cs.tenant, network)
	}
	p, client, err := cs.agentOf(ctx, network)
	if err != nil {
		return err
	}
	machines := map[string]bool{}
	for _, l := range sn.Links {
		if l.Name != link {
			continue
		}
		for _, e := range l.Endpoints {
			if endpoint == "" || e.String() == endpoint {
				machines[p.Nodes[e.Node]] = true
			}
		}
	}
	if len(machines) == 0 {
		return fmt.Errorf("network %s has no link %s (with endpoint %q); trellis --cluster FILE inspect %s shows them", network, link, endpoint, network)
	}
	var errs []error
	for _, m := range sortedKeys(machines) {
		ep, err := endpointOf(p, m)
		if err == nil {
			err = client.Link(ctx, ep, &agent.LinkRequest{Tenant: cs.tenant, Network: network, Link: link, Endpoint: endpoint, Up: args[2] == "up"})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("on %s: %w", m, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "link %s of network %s is %s on %s\n", link, network, args[2], strings.Join(sortedKeys(machines), ", "))
	return nil
}
