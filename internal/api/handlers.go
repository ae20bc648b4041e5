package api

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

// NetworkSummary is one network as `trellis ls` lists it.
type NetworkSummary struct {
	Name    string    `json:"name" example:"ospf-ring"`
	Tenant  string    `json:"tenant,omitempty" doc:"the network's tenant, when the API serves a cluster"`
	Status  string    `json:"status" enum:"up,creating,changing" doc:"up, or creating/changing if an up was interrupted"`
	Host    string    `json:"host,omitempty" doc:"this machine, for a network over several"`
	Nodes   int       `json:"nodes" doc:"nodes on this machine"`
	Links   int       `json:"links" doc:"links on this machine"`
	File    string    `json:"file" doc:"the topology file it came from"`
	Created time.Time `json:"created"`
}

type listOutput struct {
	Body struct {
		Networks []NetworkSummary `json:"networks"`
	}
}

func (s *Server) list(ctx context.Context, _ *struct{}) (*listOutput, error) {
	if s.cl != nil {
		return s.clusterList(ctx)
	}
	recs, err := s.st.List()
	if err != nil {
		return nil, problemOf(err)
	}
	out := &listOutput{}
	out.Body.Networks = []NetworkSummary{}
	for _, r := range recs {
		out.Body.Networks = append(out.Body.Networks, NetworkSummary{Name: r.Name, Status: r.Status, Host: r.Plan.Host,
			Nodes: len(r.Plan.Nodes), Links: len(r.Plan.Links), File: r.File, Created: r.Created})
	}
	return out, nil
}

type networkInput struct {
	Network string `path:"network" doc:"the network's name" example:"ospf-ring"`
}

type inspectOutput struct {
	Body *substrate.NetworkInfo
}

func (s *Server) inspect(ctx context.Context, in *networkInput) (*inspectOutput, error) {
	if s.cl != nil {
		return s.clusterInspect(ctx, in.Network)
	}
	info, err := substrate.InspectWith(s.st, in.Network, s.reader)
	if err != nil {
		return nil, problemOf(err)
	}
	return &inspectOutput{Body: info}, nil
}

// fileInput is a topology file in the request body, and where it is to apply.
type fileInput struct {
	Host    string `query:"host" doc:"which of the file's hosts this machine is (default: the one whose address is configured here)"`
	File    string `query:"file" default:"request.yaml" doc:"the file's name in errors and records; on the unix socket, relative paths (source:, rootfs, a VM's files) are read relative to it on the server's machine"`
	RawBody []byte `contentType:"application/yaml" doc:"the topology file"`
}

// parseFile checks the file and finds which of its hosts this machine is; a problem is a 4xx
// Problem and nothing has been touched. The file may name paths on this machine (source:
// files, rootfs, a VM's kernel, initrd, disk) only when root sent it, on the unix socket:
// the server would read them as root for a client that may not.
func parseFile(ctx context.Context, file, host string, body []byte) (*spec.Network, string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, "", newProblem(http.StatusBadRequest, "the request has no body: send the topology file (YAML) as the body",
			&huma.ErrorDetail{Message: "empty", Location: "body"})
	}
	parse := spec.Parse
	if _, root := fromRoot(ctx); !root {
		parse = func(file string, body []byte) (*spec.Network, error) { return spec.ParseSent(file, body, false) }
	}
	n, err := parse(file, body)
	if err != nil {
		return nil, "", problemOf(err)
	}
	switch {
	case host != "" && (len(n.Hosts) == 0 || n.Host(host) == nil):
		return nil, "", newProblem(http.StatusUnprocessableEntity, "the file has no host "+host,
			&huma.ErrorDetail{Message: "give one of the hosts of the file's hosts: section, or no host for a file without one", Location: "query.host", Value: host})
	case host == "" && len(n.Hosts) > 0:
		if host, err = substrate.LocalHost(n); err != nil {
			return nil, "", newProblem(http.StatusUnprocessableEntity, err.Error(),
				&huma.ErrorDetail{Message: "say which of the file's hosts this machine is", Location: "query.host"})
		}
	}
	return n, host, nil
}

// UpResult says what an up did.
type UpResult struct {
	Network string             `json:"network"`
	Host    string             `json:"host,omitempty"`
	Created bool               `json:"created" doc:"the network was created"`
	Nodes   int                `json:"nodes" doc:"for a created network: its nodes on this machine"`
	Links   int                `json:"links" doc:"for a created network: its links on this machine"`
	Changes []substrate.Change `json:"changes" doc:"for a network that was up: what changed (none: it matched the file)"`
	Seconds float64            `json:"seconds" doc:"how long it took"`
	Log     string             `json:"log,omitempty" doc:"with verbose: how long each step took"`
	// Replugged says, with replug, what the nodes' software had made on re-plugged interfaces.
	Replugged string `json:"replugged,omitempty" doc:"with replug: what went with the re-plugged interfaces"`
}

type upInput struct {
	Host    string `query:"host" doc:"which of the file's hosts this machine is (default: the one whose address is configured here)"`
	File    string `query:"file" default:"request.yaml" doc:"the file's name in errors and records; on the unix socket, relative paths (source:, rootfs, a VM's files) are read relative to it on the server's machine"`
	Verbose bool   `query:"verbose" doc:"return how long each step took in log"`
	Replug  bool   `query:"replug" doc:"re-plug direct links even if their interfaces carry what the nodes' software made (it goes; replugged says what); without it, such a change is refused (409) and nothing changes"`
	RawBody []byte `contentType:"application/yaml" doc:"the topology file"`
}

type upOutput struct {
	Status int
	Body   UpResult
}

func (s *Server) up(ctx context.Context, in *upInput) (*upOutput, error) {
	if s.cl != nil {
		return s.clusterUp(ctx, in)
	}
	n, host, err := parseFile(ctx, in.File, in.Host, in.RawBody)
	if err != nil {
		return nil, err
	}
	var log, replugged bytes.Buffer
	res, err := substrate.Up(s.base, s.st, n, host, in.File, s.substrate(in.Replug, logline.Logger(&replugged, &log)))
	if s.opts.Observe != nil {
		var took time.Duration
		if res != nil {
			took = res.Took
		}
		s.opts.Observe(n.Name, took, err)
	}
	if err != nil {
		return nil, problemOf(err)
	}
	out := &upOutput{Status: http.StatusOK, Body: UpResult{Network: n.Name, Host: host, Created: res.Created, Nodes: res.Nodes,
		Links: res.Links, Changes: res.Changes, Seconds: res.Took.Seconds(), Replugged: replugged.String()}}
	if res.Created {
		out.Status = http.StatusCreated
	}
	if out.Body.Changes == nil {
		out.Body.Changes = []substrate.Change{}
	}
	if in.Verbose {
		out.Body.Log = log.String()
	}
	return out, nil
}

// DiffResult is what an up of the file would change.
type DiffResult struct {
	Network string             `json:"network"`
	Changes []substrate.Change `json:"changes"`
}

type diffOutput struct {
	Body DiffResult
}

func (s *Server) diff(ctx context.Context, in *fileInput) (*diffOutput, error) {
	if s.cl != nil {
		return s.clusterDiff(ctx, in)
	}
	n, host, err := parseFile(ctx, in.File, in.Host, in.RawBody)
	if err != nil {
		return nil, err
	}
	changes, err := substrate.Preview(s.st, n, host, s.opts.Substrate)
	if err != nil {
		return nil, problemOf(err)
	}
	if changes == nil {
		changes = []substrate.Change{}
	}
	return &diffOutput{Body: DiffResult{Network: n.Name, Changes: changes}}, nil
}

func (s *Server) down(ctx context.Context, in *networkInput) (*struct{}, error) {
	if s.cl != nil {
		return nil, s.clusterDown(ctx, in.Network)
	}
	if err := substrate.Down(s.st, in.Network); err != nil {
		return nil, problemOf(err)
	}
	return nil, nil
}

// LinkState is the carrier state of a link, or of one endpoint of it.
type LinkState struct {
	State    string `json:"state" enum:"up,down" doc:"up gives the carrier back, down takes it away"`
	Endpoint string `json:"endpoint,omitempty" pattern:"^[^:]+:[^:]+$" example:"r1:eth1" doc:"only this endpoint of the link, NODE:IF"`
}

type linkStateInput struct {
	Network string `path:"network" doc:"the network's name"`
	Link    string `path:"link" doc:"the link's name, as inspect lists it" example:"r1:eth1--r2:eth1"`
	Replug  bool   `query:"replug" doc:"take a direct link down even if re-plugging it to ports takes away what the nodes' software made on its interfaces; without it, that is refused (409)"`
	Body    LinkState
}

type linkStateOutput struct {
	Body linkStateResult
}

type linkStateResult struct {
	LinkState
	Replugged
}

// Replugged is what a live change of a link says of the links it re-plugged.
type Replugged struct {
	// Replugged names each link the change re-plugged (one veth pair to ports or back), what
	// its nodes saw and how a file keeps it from that; empty when it re-plugged none.
	Replugged string `json:"replugged,omitempty" doc:"the links the change re-plugged (a point-to-point link that names no connector is one veth pair while it has nothing to enforce): their interfaces made anew, and how to keep a link's ports (connector: shortbridge)"`
}

func (s *Server) linkState(ctx context.Context, in *linkStateInput) (*linkStateOutput, error) {
	if s.cl != nil {
		return s.clusterLinkState(ctx, in)
	}
	if err := s.networkExists(in.Network); err != nil {
		return nil, err
	}
	var note bytes.Buffer
	if err := substrate.SetLinkState(s.base, s.st, in.Network, in.Link, in.Body.Endpoint, in.Body.State == "up", s.substrate(in.Replug, logline.Logger(&note, nil))); err != nil {
		return nil, problemOf(err)
	}
	return &linkStateOutput{Body: linkStateResult{in.Body, Replugged{note.String()}}}, nil
}

// substrate is the server's substrate options for one request: with its replug and log.
func (s *Server) substrate(replug bool, log *slog.Logger) substrate.Options {
	opt := s.opts.Substrate
	opt.Replug, opt.Log = replug, log
	return opt
}
