// Package tablesock gives the processes inside a node with a dataplane program a socket to
// read and write its program's tables (the role P4Runtime has for a P4 switch), without giving
// the node any right to bpf(). A helper process of the host (trellis re-executed, as a delay
// line is: internal/helperproc), one per programmable node, listens on the abstract unix socket
// "@trellis/tables" in the node's network namespace: only the node's processes can connect to
// it, and nothing of it is in the node's files. It serves the node's root (uid 0 in the node)
// one JSON request per line, with the operations of `trellis table` (dataplane.TableRequest),
// on that node's program alone, and answers one JSON line each. `up` starts it (and starts it
// again if it was killed, or if the node or its ports changed), `down` ends it, and it ends by
// itself when the node's init does.
package tablesock

import (
	"context"
	"errors"
	"time"

	"github.com/trellisnet/trellis/internal/helperproc/marked"
	"github.com/trellisnet/trellis/internal/noderuntime"
)

// Arg0 is the name a table server runs under; with the arguments after it (its marker) it marks
// the process as the server of one node of one network, which is how trellis finds it again.
const Arg0 = "trellis-tables"

// Name is the socket's abstract name in the node's network namespace ("@trellis/tables").
const Name = "@trellis/tables"

// ErrServer is returned when a table server cannot be started or ended.
var ErrServer = errors.New("table server")

// Config is what a table server is given on its standard input.
type Config struct {
	Node  string   // the node's name
	PID   int      // the node's init: the server listens in its network namespace, and ends with it
	Ports []string // the substrate devices of the node's ports, whose filters hold the program
}

// servers is the kind of helper a table server is.
var servers = marked.Kind{Arg0: Arg0, Err: ErrServer, Timeout: 30 * time.Second}

// Digest identifies a server's configuration.
func (c Config) Digest() string { return marked.Digest(c) }

// Servers returns the running table servers of network netID of state directory stateID, by
// node: pid and configuration digest.
func Servers(stateID, netID string) (map[string]noderuntime.Marked, error) {
	return servers.Find(stateID, netID)
}

// Ensure makes the table server of configuration c run, unless it runs already; one of
// another configuration (the node or its ports changed) is ended first.
func Ensure(ctx context.Context, stateID, netID string, c Config) error {
	return servers.Ensure(ctx, stateID, netID, c.Node, c, "of node "+c.Node)
}

// KillExcept ends the table servers of network netID whose node is not in keep (all of them
// with keep nil): `down`, and an `up` that removes a node or its program.
func KillExcept(stateID, netID string, keep map[string]bool) error {
	return servers.KillExcept(stateID, netID, keep)
}
