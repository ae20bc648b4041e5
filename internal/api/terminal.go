package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/substrate"
)

// ErrNoNode is returned for a node the network does not have, or that is not running.
var ErrNoNode = errors.New("no running node")

// ErrKindNoTerminal is returned for a node whose kind runs commands itself but gives no
// terminal (kinds.Runner without kinds.Terminal).
var ErrKindNoTerminal = errors.New("its kind runs commands through trellis and gives no terminal: use trellis exec")

// TerminalMessage is a control message of the terminal websocket, sent as a text frame of
// JSON. The client sends {"type":"resize","cols":C,"rows":R} when its terminal changes size;
// the server sends {"type":"exit","code":N} when the command has ended, then closes. Binary
// frames carry the terminal's bytes: the client's keys one way, the command's output the other.
type TerminalMessage struct {
	Type string `json:"type" enum:"resize,exit"`
	Cols uint16 `json:"cols,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Code int    `json:"code,omitempty" doc:"the command's exit code (exit)"`
}

type terminalInput struct {
	Network string   `path:"network" doc:"the network's name" example:"ospf-ring"`
	Node    string   `path:"node" doc:"the node's name" example:"r1"`
	Cmd     []string `query:"cmd,explode" doc:"the command and its arguments, one cmd parameter each (default: a shell, bash if the node has it)"`
	Cols    uint16   `query:"cols" default:"80" minimum:"1" maximum:"1000" doc:"the terminal's width"`
	Rows    uint16   `query:"rows" default:"24" minimum:"1" maximum:"1000" doc:"the terminal's height"`
}

type terminalOutput struct {
	Body func(huma.Context)
}

// hangupGrace is how long a command whose client went away has to end after its terminal
// hung up, before its process group is killed.
const hangupGrace = 2 * time.Second

func (s *Server) registerTerminal() {
	huma.Register(s.api, huma.Operation{OperationID: "terminal", Method: http.MethodGet, Path: "/networks/{network}/nodes/{node}/terminal",
		Summary: "Run a command in a node on a terminal, over a websocket",
		Description: "As `trellis exec NETWORK NODE [-- COMMAND...]`: a WebSocket (RFC 6455) that carries a pseudo-terminal. " +
			"Binary frames carry the terminal's bytes both ways; text frames are TerminalMessage JSON: the client's resize, the server's exit (then it closes). " +
			"A client that goes away hangs the terminal up: the command gets SIGHUP, and its process group SIGKILL 2 s later.",
		Responses: map[string]*huma.Response{"101": {Description: "Switching Protocols: the websocket"}},
	}, s.terminal)
}

// terminal checks the node exists and is running (a 404 problem otherwise, before any
// upgrade), then upgrades to a websocket and runs the command on a pty.
func (s *Server) terminal(ctx context.Context, in *terminalInput) (*terminalOutput, error) {
	if s.cl != nil {
		return nil, s.notInCluster("terminal")
	}
	if out, err := s.kindTerminal(in.Network, in.Node, in); out != nil || err != nil {
		if err != nil {
			return nil, problemOf(err)
		}
		return out, nil
	}
	pid, err := s.runningNode(in.Network, in.Node)
	if err != nil {
		return nil, problemOf(err)
	}
	argv := in.Cmd
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", "command -v bash >/dev/null && exec bash || exec sh"}
	}
	cmd, err := noderuntime.Command(pid, argv...)
	if err != nil {
		return nil, problemOf(err)
	}
	cmd.Env = append(withoutTerm(cmd.Env), "TERM=xterm-256color")
	return &terminalOutput{Body: func(hc huma.Context) {
		r, w := humago.Unwrap(hc)
		conn, err := websocket.Accept(w, r, nil) // same origin only: a page elsewhere cannot open it
		if err != nil {
			return // Accept has answered
		}
		s.runTerminal(conn, cmd, in.Cols, in.Rows)
	}}, nil
}

// runningNode returns the pid of the init of node nodeName of network.
func (s *Server) runningNode(network, nodeName string) (int, error) {
	rec, err := s.st.Load(network)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		return 0, fmt.Errorf("%w %s in %s", substrate.ErrNoNetwork, network, s.st.Dir)
	}
	if nd := planNode(rec.Plan, nodeName); nd != nil {
		if k, err := kinds.NodeKind(nd.Kind); err == nil {
			if _, ok := k.(kinds.Runner); ok { // a kinds.Terminal was served by kindTerminal
				return 0, fmt.Errorf("network %s: node %s: %w", network, nodeName, ErrKindNoTerminal)
			}
		}
	}
	running, err := noderuntime.Find(s.st.ID, rec.NetID)
	if err != nil {
		return 0, err
	}
	pid, ok := running[nodeName]
	if !ok {
		return 0, fmt.Errorf("network %s: %w %s on this machine", network, ErrNoNode, nodeName)
	}
	return pid, nil
}

func withoutTerm(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "TERM=") {
			out = append(out, e)
		}
	}
	return out
}

// runTerminal runs cmd on a pty whose bytes go over conn, until the command ends (the client
// gets its exit code), the client goes away or the server stops (the command is hung up).
func (s *Server) runTerminal(conn *websocket.Conn, cmd *exec.Cmd, cols, rows uint16) {
	defer conn.CloseNow()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: rows})
	if err != nil {
		conn.Close(websocket.StatusInternalError, closeReason(err.Error()))
		return
	}
	defer ptmx.Close()
	ctx, cancel := context.WithCancel(s.base)
	defer cancel()
	outDone := make(chan struct{})
	go func() { // the command's output to the client
		defer close(outDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 && conn.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
				cancel()
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // the client's keys and resizes to the command
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				cancel()
				return
			}
			if typ == websocket.MessageBinary {
				ptmx.Write(data)
				continue
			}
			var m TerminalMessage
			if json.Unmarshal(data, &m) == nil && m.Type == "resize" && m.Cols > 0 && m.Rows > 0 {
				pty.Setsize(ptmx, &pty.Winsize{Cols: m.Cols, Rows: m.Rows})
			}
		}
	}()
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	select {
	case err := <-waitc:
		select { // the last output, unless something the command left holds the terminal open
		case <-outDone:
		case <-time.After(time.Second):
		}
		msg, _ := json.Marshal(TerminalMessage{Type: "exit", Code: exitCode(err)})
		if conn.Write(ctx, websocket.MessageText, msg) == nil {
			conn.Close(websocket.StatusNormalClosure, "")
		}
	case <-ctx.Done():
		hangUp(cmd, ptmx.Close, waitc)
		conn.Close(websocket.StatusGoingAway, "hung up")
	}
}

// hangUp ends a command whose client went away, as a terminal hanging up would: the pty's
// master is closed and the process group (pty.Start made the command a session and group
// leader) gets SIGHUP; whatever is left of it after hangupGrace is killed.
func hangUp(cmd *exec.Cmd, closePty func() error, waitc <-chan error) {
	closePty()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP)
	select {
	case <-waitc:
		return
	case <-time.After(hangupGrace):
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-waitc
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// closeReason fits a websocket close reason's limit of 123 bytes.
func closeReason(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}

func planNode(p *plan.Plan, name string) *plan.Node {
	if p == nil {
		return nil
	}
	return p.Node(name)
}
