package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Error is a problem in a topology file. It names where, what, and how to fix it.
type Error struct {
	File  string
	Line  int
	Field string // e.g. links[2].rate
	Msg   string
	Fix   string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
	if e.Line == 0 { // not known, e.g. an empty file
		s = fmt.Sprintf("%s: %s: %s", e.File, e.Field, e.Msg)
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	// One line per problem, whatever the file's keys and paths hold.
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}

// Errors are all the problems found in one topology file, sorted by line. Parse and Load
// return them (never an empty list); errors.As finds the first *Error through Unwrap.
type Errors []*Error

// Error writes one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.Is and errors.As each problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortErrors orders problems by line; problems on one line keep the order they were found in.
func sortErrors(es []*Error) Errors {
	slices.SortStableFunc(es, func(a, b *Error) int { return a.Line - b.Line })
	return Errors(es)
}

// NodeError makes an *Error about one of a node's keys (see Node.FieldLine), for node kinds'
// checks: nodes.NAME.FIELD at the line of that key.
func (n *Network) NodeError(nd *Node, field, msg, fix string) *Error {
	return &Error{File: n.File, Line: nd.FieldLine(field), Field: joinField("nodes."+nd.Name, field), Msg: msg, Fix: fix}
}

// LinkError makes an *Error about one of a link's keys (see Link.FieldLine), for link kinds'
// checks: links[INDEX].FIELD at the line of that key.
func (n *Network) LinkError(l *Link, field, msg, fix string) *Error {
	return &Error{File: n.File, Line: l.FieldLine(field), Field: joinField(fmt.Sprintf("links[%d]", l.index), field), Msg: msg, Fix: fix}
}

// NetworkError makes an *Error about a top-level key (see Network.FieldLine), for tunnel kinds'
// checks.
func (n *Network) NetworkError(field, msg, fix string) *Error {
	return &Error{File: n.File, Line: n.FieldLine(field), Field: field, Msg: msg, Fix: fix}
}

// join names a key under a field: "links[0]" and "rate" give "links[0].rate". An empty key
// (which YAML allows) is shown as "".
func join(field, key string) string {
	if key == "" {
		key = `""`
	}
	if field == "" {
		return key
	}
	return field + "." + key
}

// joinField names a field of a node or link, or the node or link itself when field is empty.
func joinField(base, field string) string {
	if field == "" {
		return base
	}
	return join(base, field)
}
