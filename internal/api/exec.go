package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/substrate"
)

// ErrNodeDown is returned for a node of the network that does not run.
var ErrNodeDown = errors.New("the node does not run")

// defaultExecTimeout is how long a command may run unless the request says otherwise.
const defaultExecTimeout = 60.0

// ExecRequest is a command to run in a node, non-interactively.
type ExecRequest struct {
	Argv    []string `json:"argv" minItems:"1" example:"[\"ip\", \"route\"]" doc:"the command and its arguments (no shell: give [\"sh\", \"-c\", \"...\"] for one)"`
	Stdin   string   `json:"stdin,omitempty" maxLength:"16777216" doc:"the command's standard input (none if absent)"`
	Timeout float64  `json:"timeout,omitempty" minimum:"0" maximum:"86400" doc:"seconds after which the command is killed (default 60)"`
}

// ExecResult is how a command run in a node ended, and what it wrote.
type ExecResult struct {
	ExitCode  int     `json:"exit_code" doc:"the command's exit code (128+N if signal N ended it; 127: not found)"`
	Stdout    string  `json:"stdout"`
	Stderr    string  `json:"stderr"`
	TimedOut  bool    `json:"timed_out,omitempty" doc:"the command ran past its timeout and was killed"`
	Truncated bool    `json:"truncated,omitempty" doc:"stdout or stderr was longer than 16 MiB and was cut"`
	Seconds   float64 `json:"seconds" doc:"how long it ran"`
}

type execInput struct {
	Network string `path:"network" doc:"the network's name"`
	Node    string `path:"node" doc:"the node's name" example:"r1"`
	Body    ExecRequest
}

type execOutput struct {
	Body ExecResult
}

func (s *Server) registerExec() {
	huma.Register(s.api, huma.Operation{OperationID: "exec", Method: http.MethodPost, Path: "/networks/{network}/nodes/{node}/exec",
		Summary: "Run a command in a node and return its exit code and output",
		Description: "As `trellis exec NETWORK NODE -- ARGV...`, without a terminal: the command runs in the node's namespaces with its " +
			"reduced capabilities, standard input from stdin, until it exits or its timeout. A command that fails still gets 200, " +
			"with its exit code. A client that goes away has the command killed."}, s.exec)
}

func (s *Server) exec(ctx context.Context, in *execInput) (*execOutput, error) {
	if s.cl != nil {
		return s.clusterExec(ctx, in)
	}
	pid, err := s.nodePID(in.Network, in.Node)
	if err != nil {
		return nil, problemOf(err)
	}
	timeout := in.Body.Timeout
	if timeout == 0 {
		timeout = defaultExecTimeout
	}
	res, err := noderuntime.Run(ctx, pid, in.Body.Argv, in.Body.Stdin, time.Duration(timeout*float64(time.Second)))
	if err != nil {
		return nil, problemOf(fmt.Errorf("node %s: %w", in.Node, err))
	}
	return &execOutput{Body: ExecResult(*res)}, nil
}

// nodePID finds the init of a running node of a network.
func (s *Server) nodePID(network, name string) (int, error) {
	rec, err := s.st.Load(network)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		return 0, fmt.Errorf("%w %s in %s", substrate.ErrNoNetwork, network, s.st.Dir)
	}
	if rec.Plan.Node(name) == nil {
		return 0, fmt.Errorf("network %s: %w %q on this machine", network, ErrNoNode, name)
	}
	running, err := noderuntime.Find(s.st.ID, rec.NetID)
	if err != nil {
		return 0, err
	}
	pid, ok := running[name]
	if !ok {
		return 0, fmt.Errorf("network %s: node %s: %w (status %s): run `trellis up` with its file", network, name, ErrNodeDown, rec.Status)
	}
	return pid, nil
}
