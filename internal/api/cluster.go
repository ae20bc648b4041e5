package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

// The operations of a cluster's API: what `trellis --cluster` does, for the caller's tenant
// (tenancy.go has who may do what).

func (s *Server) wait() time.Duration {
	if s.cl.Wait > 0 {
		return s.cl.Wait
	}
	return 2 * time.Minute
}

// clusterList lists the caller's networks (the administrator's: every tenant's, or the
// header's tenant's).
func (s *Server) clusterList(ctx context.Context) (*listOutput, error) {
	nets, _, err := s.cl.Store.Networks(ctx, callerOf(ctx).tenant)
	if err != nil {
		return nil, problemOf(err)
	}
	out := &listOutput{}
	out.Body.Networks = []NetworkSummary{}
	for _, n := range nets {
		pr, err := s.cl.Store.ProgressOf(ctx, n.Tenant, n.Name, n.Revision)
		if err != nil {
			return nil, problemOf(err)
		}
		sum := NetworkSummary{Name: n.Name, Tenant: n.Tenant, Status: pr.State(n.Revision), File: n.File, Created: n.Updated}
		if pr.Placement != nil {
			sum.Nodes = len(pr.Placement.Nodes)
		}
		if sn, err := n.Spec(); err == nil {
			sum.Nodes, sum.Links = len(sn.Nodes), len(sn.Links)
		}
		out.Body.Networks = append(out.Body.Networks, sum)
	}
	return out, nil
}

// clusterInspect describes a network from etcd: its nodes, where they run (a note "machine
// M"), and its links with the counters the agents last reported.
func (s *Server) clusterInspect(ctx context.Context, name string) (*inspectOutput, error) {
	tenant := callerOf(ctx).scoped()
	n, err := s.cl.Store.Network(ctx, tenant, name)
	if err != nil {
		return nil, clusterProblem(tenant, name, err)
	}
	pr, err := s.cl.Store.ProgressOf(ctx, tenant, name, n.Revision)
	if err != nil {
		return nil, problemOf(err)
	}
	sn, err := n.Spec()
	if err != nil {
		return nil, problemOf(err)
	}
	info := &substrate.NetworkInfo{Name: n.Name, Status: pr.State(n.Revision), File: n.File, Nodes: []substrate.NodeInfo{}, Links: []substrate.LinkInfo{}}
	converged := map[string]bool{}
	ports := map[string]cluster.Port{}
	for _, st := range pr.Statuses {
		converged[st.Machine] = st.Generation == n.Revision && st.State == cluster.Converged
		for _, p := range st.Ports {
			ports[p.Link+" "+p.Endpoint] = p
		}
	}
	for _, nd := range sn.Nodes {
		ni := substrate.NodeInfo{Name: nd.Name, Kind: nd.Kind, Interfaces: []substrate.InterfaceInfo{}}
		if pr.Placement != nil {
			if m, ok := pr.Placement.Nodes[nd.Name]; ok {
				ni.Running, ni.Notes = converged[m], []string{"machine " + m}
			}
		}
		info.Nodes = append(info.Nodes, ni)
	}
	for _, l := range sn.Links {
		li := substrate.LinkInfo{Name: l.Name, Connector: l.Connector, Rate: l.RateText, MTU: l.MTU, State: l.State}
		for _, e := range l.Endpoints {
			p := ports[l.Name+" "+e.String()]
			li.Endpoints = append(li.Endpoints, substrate.EndpointInfo{Node: e.Node, Interface: e.Ifname, State: l.State,
				TxPackets: p.TxPackets, TxBytes: p.TxBytes, RxPackets: p.RxPackets, RxBytes: p.RxBytes, Drops: p.Drops})
		}
		info.Links = append(info.Links, li)
	}
	return &inspectOutput{Body: info}, nil
}

// parseClusterFile checks a topology file for the cluster; it names no path on the server's
// machine (spec.ParseSent), so a file must carry its files' content inline.
func parseClusterFile(file string, body []byte) (*spec.Network, error) {
	if len(body) == 0 {
		return nil, newProblem(http.StatusBadRequest, "the request has no body: send the topology file (YAML) as the body")
	}
	sn, err := spec.ParseSent(file, body, true)
	if err != nil {
		return nil, problemOf(err)
	}
	return sn, nil
}

// clusterUp writes the network to etcd for the caller's tenant (within its quota) and waits
// until its machines converge; a network the placer refuses is taken back, as the CLI does.
func (s *Server) clusterUp(ctx context.Context, in *upInput) (*upOutput, error) {
	tenant := callerOf(ctx).scoped()
	sn, err := parseClusterFile(in.File, in.RawBody)
	if err != nil {
		return nil, err
	}
	n := &cluster.Network{Tenant: tenant, Name: sn.Name, File: in.File, Source: string(in.RawBody)}
	old, err := s.cl.Store.Network(ctx, tenant, n.Name)
	if err != nil && !errors.Is(err, cluster.ErrNotFound) {
		return nil, clusterProblem(tenant, n.Name, err)
	}
	out := &upOutput{Status: http.StatusOK, Body: UpResult{Network: n.Name, Nodes: len(sn.Nodes), Links: len(sn.Links), Changes: []substrate.Change{}}}
	var expect int64
	var oldSpec *spec.Network
	if old != nil {
		if old.Source == n.Source {
			return out, nil
		}
		expect = old.Revision
		oldSpec, _ = old.Spec()
	}
	start := time.Now()
	gen, err := s.cl.Store.Up(ctx, n, expect)
	if err != nil {
		return nil, clusterProblem(tenant, n.Name, err)
	}
	wctx, cancel := context.WithTimeout(s.base, s.wait()) // a client that goes away leaves no half-made network
	defer cancel()
	if _, err := s.cl.Store.Wait(wctx, tenant, n.Name, gen); err != nil {
		if errors.Is(err, cluster.ErrRefused) {
			err = s.takeBack(tenant, n.Name, old, gen, err)
		}
		return nil, clusterProblem(tenant, n.Name, err)
	}
	out.Body.Seconds = time.Since(start).Seconds()
	out.Body.Changes = changesOf(cluster.DiffSpecs(oldSpec, sn))
	if old == nil {
		out.Status, out.Body.Created = http.StatusCreated, true
	}
	return out, nil
}

// takeBack undoes an up the placer refused: a new network is removed, a changed one gets its
// former file back.
func (s *Server) takeBack(tenant, name string, old *cluster.Network, gen int64, cause error) error {
	ctx, cancel := context.WithTimeout(s.base, 30*time.Second)
	defer cancel()
	if old == nil {
		if err := s.cl.Store.Down(ctx, tenant, name, gen); err != nil {
			return errors.Join(cause, fmt.Errorf("and removing it failed: %w", err))
		}
		return fmt.Errorf("%w; nothing was created", cause)
	}
	if _, err := s.cl.Store.Up(ctx, old, gen); err != nil {
		return errors.Join(cause, fmt.Errorf("and putting the former file back failed: %w", err))
	}
	return fmt.Errorf("%w; the network keeps running as it was", cause)
}

// changesOf turns the cluster's lines of difference ("+ node c", "~ link ab: rate 10mbit ->
// 50mbit", "! node r3 (restarts): ...") into changes.
func changesOf(lines []string) []substrate.Change {
	out := []substrate.Change{}
	for _, l := range lines {
		parts := strings.SplitN(l, " ", 3)
		op, ok := map[string]string{"+": "add", "-": "remove", "~": "change", "!": "restart"}[parts[0]]
		if !ok || len(parts) < 3 {
			out = append(out, substrate.Change{Op: "change", What: []string{l}})
			continue
		}
		name, what, _ := strings.Cut(parts[2], " ")
		c := substrate.Change{Op: op, Object: parts[1], Name: strings.TrimSuffix(name, ":")}
		if what = strings.TrimSpace(what); what != "" {
			c.What = []string{what}
		}
		out = append(out, c)
	}
	return out
}

// clusterDiff shows what an up of the file would change in the cluster.
func (s *Server) clusterDiff(ctx context.Context, in *fileInput) (*diffOutput, error) {
	tenant := callerOf(ctx).scoped()
	sn, err := parseClusterFile(in.File, in.RawBody)
	if err != nil {
		return nil, err
	}
	var oldSpec *spec.Network
	if old, err := s.cl.Store.Network(ctx, tenant, sn.Name); err == nil {
		oldSpec, _ = old.Spec()
	} else if !errors.Is(err, cluster.ErrNotFound) {
		return nil, clusterProblem(tenant, sn.Name, err)
	}
	return &diffOutput{Body: DiffResult{Network: sn.Name, Changes: changesOf(cluster.DiffSpecs(oldSpec, sn))}}, nil
}

// clusterDown removes the network from etcd and waits until no machine holds it.
func (s *Server) clusterDown(ctx context.Context, name string) error {
	tenant := callerOf(ctx).scoped()
	if err := s.cl.Store.Down(ctx, tenant, name, 0); err != nil {
		return clusterProblem(tenant, name, err)
	}
	deadline := time.Now().Add(s.wait())
	for {
		sts, err := s.cl.Store.Statuses(s.base, tenant, name)
		if err != nil || len(sts) == 0 {
			return problemOrNil(err)
		}
		if time.Now().After(deadline) {
			return newProblem(http.StatusGatewayTimeout, fmt.Sprintf("network %s was removed from the cluster, but %d machines still hold it after %v", name, len(sts), s.wait()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func problemOrNil(err error) error {
	if err == nil {
		return nil
	}
	return problemOf(err)
}

// placed returns the placement of the caller's network and the agent endpoint of machine m.
func (s *Server) placed(ctx context.Context, network string) (*cluster.Placement, error) {
	tenant := callerOf(ctx).scoped()
	p, err := s.cl.Store.Placement(ctx, tenant, network)
	if err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			return nil, newProblem(http.StatusConflict, fmt.Sprintf("network %s of tenant %s is not placed yet", network, tenant))
		}
		return nil, problemOf(err)
	}
	return p, nil
}

func endpointOf(p *cluster.Placement, m string) (string, error) {
	u, ok := p.Machines[m]
	if !ok || u.Endpoint == "" {
		return "", newProblem(http.StatusServiceUnavailable, fmt.Sprintf("the agent of machine %s serves no endpoint for exec and link (start it with --listen)", m))
	}
	return u.Endpoint, nil
}

// agentProblem maps an agent's refusal or failure to a Problem.
func agentProblem(err error) error {
	if errors.Is(err, agent.ErrRefused) {
		return newProblem(http.StatusBadRequest, err.Error())
	}
	return newProblem(http.StatusBadGateway, err.Error())
}

// clusterExec runs a command in a node through the agent of its machine.
func (s *Server) clusterExec(ctx context.Context, in *execInput) (*execOutput, error) {
	p, err := s.placed(ctx, in.Network)
	if err != nil {
		return nil, err
	}
	m, ok := p.Nodes[in.Node]
	if !ok {
		return nil, newProblem(http.StatusNotFound, fmt.Sprintf("network %s has no node %s", in.Network, in.Node))
	}
	ep, err := endpointOf(p, m)
	if err != nil {
		return nil, err
	}
	res, err := s.cl.Agents.Exec(ctx, ep, &agent.ExecRequest{Tenant: callerOf(ctx).scoped(), Network: in.Network, Node: in.Node,
		Argv: in.Body.Argv, Stdin: in.Body.Stdin, Timeout: in.Body.Timeout})
	if err != nil {
		return nil, agentProblem(err)
	}
	return &execOutput{Body: ExecResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut,
		Truncated: res.Truncated, Seconds: res.Seconds}}, nil
}

// clusterLinkState sets a link's carrier through the agent of every machine that holds an
// endpoint of it (or the one of the endpoint given).
func (s *Server) clusterLinkState(ctx context.Context, in *linkStateInput) (*linkStateOutput, error) {
	tenant := callerOf(ctx).scoped()
	n, err := s.cl.Store.Network(ctx, tenant, in.Network)
	if err != nil {
		return nil, clusterProblem(tenant, in.Network, err)
	}
	sn, err := n.Spec()
	if err != nil {
		return nil, problemOf(err)
	}
	p, err := s.placed(ctx, in.Network)
	if err != nil {
		return nil, err
	}
	var machines []string
	for _, l := range sn.Links {
		for _, e := range l.Endpoints {
			if m := p.Nodes[e.Node]; l.Name == in.Link && (in.Body.Endpoint == "" || e.String() == in.Body.Endpoint) && !slices.Contains(machines, m) {
				machines = append(machines, m)
			}
		}
	}
	if len(machines) == 0 {
		return nil, newProblem(http.StatusNotFound, fmt.Sprintf("network %s has no link %s (with endpoint %q)", in.Network, in.Link, in.Body.Endpoint))
	}
	slices.Sort(machines)
	for _, m := range machines {
		ep, err := endpointOf(p, m)
		if err != nil {
			return nil, err
		}
		req := &agent.LinkRequest{Tenant: tenant, Network: in.Network, Link: in.Link, Endpoint: in.Body.Endpoint, Up: in.Body.State == "up"}
		if err := s.cl.Agents.Link(ctx, ep, req); err != nil {
			return nil, agentProblem(fmt.Errorf("on %s: %w", m, err))
		}
	}
	return &linkStateOutput{Body: linkStateResult{LinkState: in.Body}}, nil
}
