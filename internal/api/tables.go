package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/substrate"
)

// The tables (maps) of a node's dataplane program (docs/ebpf-nodes.md), as `trellis table`
// reads and writes them: the same operations (dataplane.UserProgram.Do), keys and values as
// hex bytes in memory order.

// The path parameters: each input has them all (huma reads no fields of unexported embedded
// structs).
type tablesPath struct {
	Network string `path:"network" doc:"the network's name"`
	Node    string `path:"node" doc:"the node's name; it has a dataplane program" example:"s1"`
}

type tablePath struct {
	Network string `path:"network" doc:"the network's name"`
	Node    string `path:"node" doc:"the node's name; it has a dataplane program" example:"s1"`
	Table   string `path:"table" doc:"the table's name, as the program declares it" example:"routes"`
}

type entryPath struct {
	Network string `path:"network" doc:"the network's name"`
	Node    string `path:"node" doc:"the node's name; it has a dataplane program" example:"s1"`
	Table   string `path:"table" doc:"the table's name, as the program declares it" example:"routes"`
	Key     string `path:"key" doc:"the key in hex, in memory order, as long as the table's keys (separators . : - _ allowed)" example:"18000000.0a000200"`
}

// EntryValue is the value of a table's entry, in hex.
type EntryValue struct {
	Value string `json:"value" example:"02aabbccddee.0200" doc:"the value in hex, in memory order, as long as the table's values (separators . : - _ allowed)"`
}

type setEntryInput struct {
	Network string `path:"network" doc:"the network's name"`
	Node    string `path:"node" doc:"the node's name; it has a dataplane program" example:"s1"`
	Table   string `path:"table" doc:"the table's name, as the program declares it" example:"routes"`
	Key     string `path:"key" doc:"the key in hex, in memory order, as long as the table's keys (separators . : - _ allowed)" example:"18000000.0a000200"`
	Body    EntryValue
}

type tablesOutput struct {
	Body struct {
		Tables []dataplane.Table `json:"tables" doc:"the program's tables; read_only: filled by trellis (the ports)"`
	}
}

type dumpOutput struct {
	Body struct {
		Entries []dataplane.HexEntry `json:"entries"`
	}
}

type entryOutput struct {
	Body dataplane.HexEntry
}

func (s *Server) registerTables() {
	const base = "/networks/{network}/nodes/{node}/tables"
	same := " Keys and values are hex bytes in memory order, exactly as long as the table's (`trellis table` explains them). " +
		"An unknown network, node or table is 404 (an unknown table's problem names those there are); a key or value of the wrong size, or not hex, 422; " +
		"a write to one of trellis's own tables (the ports) 403; nothing is changed by a refused request."
	huma.Register(s.api, huma.Operation{OperationID: "list-tables", Method: http.MethodGet, Path: base,
		Summary: "List the tables of a node's dataplane program", Description: "As `trellis table NETWORK NODE`: each table's name, type, key and value sizes in bytes and number of entries it holds at most." + same}, s.listTables)
	huma.Register(s.api, huma.Operation{OperationID: "dump-table", Method: http.MethodGet, Path: base + "/{table}",
		Summary: "Read every entry of a table", Description: "As `trellis table NETWORK NODE TABLE dump`." + same}, s.dumpTable)
	huma.Register(s.api, huma.Operation{OperationID: "get-table-entry", Method: http.MethodGet, Path: base + "/{table}/entries/{key}",
		Summary: "Read one entry of a table", Description: "As `trellis table NETWORK NODE TABLE get KEY`; a key the table does not have is 404." + same}, s.getEntry)
	huma.Register(s.api, huma.Operation{OperationID: "set-table-entry", Method: http.MethodPut, Path: base + "/{table}/entries/{key}",
		Summary: "Write one entry of a table", Description: "As `trellis table NETWORK NODE TABLE set KEY VALUE`: the program sees it at once." + same}, s.setEntry)
	huma.Register(s.api, huma.Operation{OperationID: "delete-table-entry", Method: http.MethodDelete, Path: base + "/{table}/entries/{key}",
		Summary: "Remove one entry of a table", DefaultStatus: http.StatusNoContent,
		Description: "As `trellis table NETWORK NODE TABLE del KEY`; a key the table does not have is 404." + same}, s.deleteEntry)
}

func (s *Server) listTables(ctx context.Context, in *tablesPath) (*tablesOutput, error) {
	r, err := s.tableDo(in.Network, in.Node, dataplane.TableRequest{Op: dataplane.OpTables})
	if err != nil {
		return nil, err
	}
	out := &tablesOutput{}
	out.Body.Tables = r.Tables
	return out, nil
}

func (s *Server) dumpTable(ctx context.Context, in *tablePath) (*dumpOutput, error) {
	r, err := s.tableDo(in.Network, in.Node, dataplane.TableRequest{Op: dataplane.OpDump, Table: in.Table})
	if err != nil {
		return nil, err
	}
	out := &dumpOutput{}
	out.Body.Entries = r.Entries
	return out, nil
}

func (s *Server) getEntry(ctx context.Context, in *entryPath) (*entryOutput, error) {
	r, err := s.tableDo(in.Network, in.Node, dataplane.TableRequest{Op: dataplane.OpGet, Table: in.Table, Key: in.Key})
	if err != nil {
		return nil, err
	}
	return &entryOutput{Body: dataplane.HexEntry{Key: canonicalHex(in.Key), Value: r.Value}}, nil
}

func (s *Server) setEntry(ctx context.Context, in *setEntryInput) (*entryOutput, error) {
	if _, err := s.tableDo(in.Network, in.Node, dataplane.TableRequest{Op: dataplane.OpSet, Table: in.Table, Key: in.Key, Value: in.Body.Value}); err != nil {
		return nil, err
	}
	return &entryOutput{Body: dataplane.HexEntry{Key: canonicalHex(in.Key), Value: canonicalHex(in.Body.Value)}}, nil
}

func (s *Server) deleteEntry(ctx context.Context, in *entryPath) (*struct{}, error) {
	_, err := s.tableDo(in.Network, in.Node, dataplane.TableRequest{Op: dataplane.OpDel, Table: in.Table, Key: in.Key})
	return nil, err
}

// canonicalHex writes hex (checked already) without separators.
func canonicalHex(s string) string {
	b, _ := dataplane.ParseHex(s)
	return fmt.Sprintf("%x", b)
}

// tableDo runs operation r on the tables of the program of the node in; an error is a Problem.
func (s *Server) tableDo(network, node string, r dataplane.TableRequest) (*dataplane.TableReply, error) {
	if s.cl != nil {
		return nil, s.notInCluster("tables")
	}
	rec, err := s.st.Load(network)
	if err != nil {
		return nil, problemOf(err)
	}
	if rec == nil || rec.Plan == nil {
		return nil, problemOf(fmt.Errorf("%w %s in %s", substrate.ErrNoNetwork, network, s.st.Dir))
	}
	nd := rec.Plan.Node(node)
	if nd == nil {
		var names []string
		for _, n := range rec.Plan.Nodes {
			names = append(names, n.Name)
		}
		return nil, newProblem(http.StatusNotFound, fmt.Sprintf("network %s has no node %q: its nodes are %s", network, node, strings.Join(names, ", ")))
	}
	if nd.Dataplane == nil {
		return nil, newProblem(http.StatusNotFound, fmt.Sprintf("network %s: node %s has no dataplane program, so no tables (docs/ebpf-nodes.md)", network, node))
	}
	u, err := substrate.NodeProgram(s.st, network, node)
	if err != nil {
		return nil, tableProblem(err)
	}
	defer u.Close()
	reply, err := u.Do(r)
	if err != nil {
		return nil, tableProblem(err)
	}
	return reply, nil
}

// tableProblem maps an error of a table operation to its status.
func tableProblem(err error) error {
	switch {
	case errors.Is(err, dataplane.ErrNoTable), errors.Is(err, dataplane.ErrNoEntry):
		return newProblem(http.StatusNotFound, err.Error())
	case errors.Is(err, dataplane.ErrEntrySize), errors.Is(err, dataplane.ErrBadHex), errors.Is(err, dataplane.ErrProgram):
		return newProblem(http.StatusUnprocessableEntity, err.Error()+"; nothing was changed")
	case errors.Is(err, dataplane.ErrReadOnly):
		return newProblem(http.StatusForbidden, err.Error())
	case errors.Is(err, substrate.ErrNoProgram):
		return newProblem(http.StatusConflict, err.Error())
	}
	return problemOf(err)
}
