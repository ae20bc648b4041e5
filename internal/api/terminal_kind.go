package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/coder/websocket"
	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/substrate"
)

// kindTerminal returns the terminal of a node whose kind gives terminals itself (a VM's guest
// agent, kinds.Terminal), or nil for a node entered through its namespaces.
func (s *Server) kindTerminal(network, nodeName string, in *terminalInput) (*terminalOutput, error) {
	rec, err := s.st.Load(network)
	if err != nil || rec == nil {
		return nil, err
	}
	nd := planNode(rec.Plan, nodeName)
	if nd == nil {
		return nil, nil
	}
	k, err := kinds.NodeKind(nd.Kind)
	if err != nil {
		return nil, nil
	}
	t, ok := k.(kinds.Terminal)
	if !ok {
		return nil, nil
	}
	env := &kinds.Env{Store: s.st, Plan: rec.Plan}
	running, err := substrate.RunningNodes(s.st, rec)
	if err != nil {
		return nil, err
	}
	inst, ok := running[nodeName]
	if !ok {
		return nil, fmt.Errorf("network %s: %w %s on this machine", network, ErrNoNode, nodeName)
	}
	argv := in.Cmd
	if len(argv) == 0 {
		argv = []string{"/bin/bash", "-l"}
	}
	return &terminalOutput{Body: func(hc huma.Context) {
		r, w := humago.Unwrap(hc)
		conn, err := websocket.Accept(w, r, nil) // same origin only
		if err != nil {
			return
		}
		defer conn.CloseNow()
		s.attachTerminal(conn, t, env, inst, argv, [2]uint16{in.Rows, in.Cols})
	}}, nil
}

// attachTerminal carries a kind's terminal session over conn: binary frames both ways, the
// client's resize messages, and the exit message at the end.
func (s *Server) attachTerminal(conn *websocket.Conn, t kinds.Terminal, env *kinds.Env, inst kinds.Instance, argv []string, size [2]uint16) {
	ctx, cancel := context.WithCancel(s.base)
	defer cancel()
	keys, keysW := io.Pipe()
	resize := make(chan [2]uint16, 4)
	go func() { // the client's keys and resizes
		defer keysW.Close()
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				cancel() // the client went away: the session ends
				return
			}
			if typ == websocket.MessageBinary {
				keysW.Write(data)
				continue
			}
			var m TerminalMessage
			if json.Unmarshal(data, &m) == nil && m.Type == "resize" && m.Cols > 0 && m.Rows > 0 {
				select {
				case resize <- [2]uint16{m.Rows, m.Cols}:
				default:
				}
			}
		}
	}()
	out := writerFunc(func(p []byte) (int, error) {
		if err := conn.Write(ctx, websocket.MessageBinary, p); err != nil {
			return 0, err
		}
		return len(p), nil
	})
	code, err := t.Attach(ctx, env, inst, argv, size, keys, out, resize)
	if err != nil {
		conn.Close(websocket.StatusInternalError, closeReason(err.Error()))
		return
	}
	msg, _ := json.Marshal(TerminalMessage{Type: "exit", Code: code})
	if conn.Write(ctx, websocket.MessageText, msg) == nil {
		conn.Close(websocket.StatusNormalClosure, "")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
