package embedsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
)

// ErrTrace is a trace file that cannot be used.
var ErrTrace = errors.New("bad trace")

// Trace is the file format of --trace and --write-trace (docs/embedding.md).
type Trace struct {
	Problem   string       `json:"problem,omitempty"` // "vne" (default) or "placement"
	Substrate traceSub     `json:"substrate"`
	Requests  []pe.Request `json:"requests"`
}

type traceSub struct {
	Nodes []traceNode `json:"nodes"`
	Links []pe.Link   `json:"links"`
}

// traceNode is a substrate node; id, when given, must be its index in the list.
type traceNode struct {
	ID *int `json:"id,omitempty"`
	pe.Node
}

// ReadTrace reads a trace file into an instance named after the file.
func ReadTrace(path string) (*Instance, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	in, err := ParseTrace(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	in.Workload = "trace:" + strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return in, nil
}

// ParseTrace decodes and checks a trace; errors name the field ("requests[3].links[0].a").
func ParseTrace(data []byte) (*Instance, error) {
	var t Trace
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%w: line %d: %v", ErrTrace, lineOf(data, se.Offset), se)
		case errors.As(err, &te):
			field := strings.ReplaceAll(te.Field, ".Node.", ".")
			return nil, fmt.Errorf("%w: line %d: field %s: a %s where a %s belongs", ErrTrace, lineOf(data, te.Offset), field, te.Value, te.Type)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%w: line %d: the file ends inside a value: a bracket or brace is not closed", ErrTrace, lineOf(data, int64(len(data))))
		}
		return nil, fmt.Errorf("%w: %v", ErrTrace, err)
	}
	in := &Instance{Requests: t.Requests, Problem: pe.VNE}
	for _, n := range t.Substrate.Nodes {
		in.Sub.Nodes = append(in.Sub.Nodes, n.Node)
	}
	in.Sub.Links = t.Substrate.Links
	switch t.Problem {
	case "", "vne":
	case "placement":
		in.Problem = pe.Placement
	default:
		return nil, fmt.Errorf("%w: problem: %q is neither \"vne\" nor \"placement\"", ErrTrace, t.Problem)
	}
	if err := checkTrace(&t); err != nil {
		return nil, err
	}
	return in, nil
}

func lineOf(data []byte, off int64) int {
	return 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n"))
}

func checkTrace(t *Trace) error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrTrace, field, fmt.Sprintf(format, a...))
	}
	s := &t.Substrate
	if len(s.Nodes) == 0 {
		return bad("substrate.nodes", "missing or empty: give at least one node")
	}
	for i, n := range s.Nodes {
		if n.ID != nil && *n.ID != i {
			return bad(fmt.Sprintf("substrate.nodes[%d].id", i), "is %d: ids must be 0, 1, 2... in list order", *n.ID)
		}
		if n.CPU < 0 || n.Mem < 0 || n.NIC < 0 {
			return bad(fmt.Sprintf("substrate.nodes[%d]", i), "capacity must not be negative")
		}
	}
	for i, l := range s.Links {
		f := fmt.Sprintf("substrate.links[%d]", i)
		if l.A < 0 || l.A >= len(s.Nodes) {
			return bad(f+".a", "%d is not a substrate node (0..%d)", l.A, len(s.Nodes)-1)
		}
		if l.B < 0 || l.B >= len(s.Nodes) || l.B == l.A {
			return bad(f+".b", "%d is not a substrate node other than a (0..%d)", l.B, len(s.Nodes)-1)
		}
		if l.BW < 0 {
			return bad(f+".bw", "must not be negative")
		}
	}
	prev := 0.0
	for i, r := range t.Requests {
		f := fmt.Sprintf("requests[%d]", i)
		if r.Arrival < prev {
			return bad(f+".arrival", "%g comes before the previous request's %g: list requests by arrival", r.Arrival, prev)
		}
		prev = r.Arrival
		if r.Lifetime <= 0 {
			return bad(f+".lifetime", "must be positive, not %g", r.Lifetime)
		}
		if len(r.Nodes) == 0 {
			return bad(f+".nodes", "missing or empty: give at least one node")
		}
		for j, n := range r.Nodes {
			if n.CPU < 0 || n.Mem < 0 {
				return bad(fmt.Sprintf("%s.nodes[%d]", f, j), "demand must not be negative")
			}
		}
		for j, l := range r.Links {
			lf := fmt.Sprintf("%s.links[%d]", f, j)
			if l.A < 0 || l.A >= len(r.Nodes) {
				return bad(lf+".a", "%d is not a node of the request (0..%d)", l.A, len(r.Nodes)-1)
			}
			if l.B < 0 || l.B >= len(r.Nodes) || l.B == l.A {
				return bad(lf+".b", "%d is not a node of the request other than a (0..%d)", l.B, len(r.Nodes)-1)
			}
			if l.BW < 0 {
				return bad(lf+".bw", "must not be negative")
			}
		}
	}
	return nil
}

// WriteTrace writes an instance as a trace file.
func WriteTrace(path string, in *Instance) error {
	t := Trace{Requests: in.Requests, Substrate: traceSub{Links: in.Sub.Links}}
	for i, n := range in.Sub.Nodes {
		id := i
		t.Substrate.Nodes = append(t.Substrate.Nodes, traceNode{ID: &id, Node: n})
	}
	if in.Problem == pe.Placement {
		t.Problem = "placement"
	}
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
