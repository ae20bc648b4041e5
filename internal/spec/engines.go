package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Dispatch modes: how a node with parallel forwarding engines (docs/design.md, decision 12)
// spreads its transit frames over them.
const (
	DispatchRoundRobin = "round-robin" // each frame to the next engine in turn
	DispatchWeighted   = "weighted"    // in proportion to the engines' weights (the paper's proportional strategy)
	DispatchFlow       = "flow"        // by a hash of the flow fields: a flow stays on one engine
)

// Flow fields a `dispatch: flow` may hash, for IPv4 and IPv6 frames.
const (
	FieldSrc   = "src"   // source address
	FieldDst   = "dst"   // destination address
	FieldProto = "proto" // protocol (IPv6: the next header)
	FieldSport = "sport" // TCP, UDP or SCTP source port
	FieldDport = "dport" // TCP, UDP or SCTP destination port
)

// FlowFields are the flow fields, in the order the classifier hashes them; also the default.
var FlowFields = []string{FieldSrc, FieldDst, FieldProto, FieldSport, FieldDport}

// Limits of the engines of one node.
const (
	MaxEngines   = 64   // engines of one node
	MaxWeight    = 100  // an engine's weight
	MaxCPU       = 4095 // the highest CPU number an engine may name
	MaxShare     = 64   // the most cores an engine may ask a share of
	MaxFlowBytes = 16   // bytes a non-IP flow key may take
	MaxFlowEnd   = 128  // a non-IP flow key lies in the frame's first MaxFlowEnd bytes
)

var dispatchModes = []string{DispatchRoundRobin, DispatchWeighted, DispatchFlow}

// Engine is one forwarding engine of a node: a copy of its data plane.
type Engine struct {
	CPUs []int `json:",omitempty"` // the cores its forwarding runs on; none: wherever frames arrive
	// Share, instead of CPUs, asks for this much of the machine's cores (0.5: half a core;
	// 1.5: one core and half of another); trellis gives out the cores (docs/engines.md).
	Share  float64 `json:",omitempty"`
	Weight int     // its share under `dispatch: weighted` (1 unless given)
	Host   string  `json:",omitempty"` // the machine it runs on; "" is its node's
	Line   int

	weightGiven          bool
	weightLine, hostLine int
}

// Dispatch says how a node's transit frames are spread over its engines.
type Dispatch struct {
	Mode string // one of the Dispatch* modes
	// Fields are the flow fields hashed for IP frames (flow only; default FlowFields).
	Fields []string `json:",omitempty"`
	// Offset and Length, when Length > 0, select bytes of non-IP frames to hash (flow only);
	// without them non-IP frames go to the control node.
	Offset int `json:",omitempty"`
	Length int `json:",omitempty"`
	Line   int
}

// engines reads a node's `engines:` (a count, or a list of engines).
func (p *parser) engines(nd *Node, v *yaml.Node, field string) {
	if v.Kind == yaml.ScalarNode {
		n, err := strconv.Atoi(v.Value)
		if err != nil || n < 1 || n > MaxEngines {
			p.fail(v, field, fmt.Sprintf("%q is not a number of engines", v.Value),
				fmt.Sprintf("give a count from 1 to %d, or a list of engines with cpus, weight and host", MaxEngines))
			return
		}
		for range n {
			nd.Engines = append(nd.Engines, Engine{Weight: 1, Line: v.Line})
		}
		return
	}
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 || len(v.Content) > MaxEngines {
		p.fail(v, field, "expected a number of engines or a list of 1 to "+strconv.Itoa(MaxEngines)+" engines",
			"write e.g. `engines: 3`, or `engines: [{cpus: 0, weight: 2}, {cpus: 1}]`")
		return
	}
	for i, item := range v.Content {
		nd.Engines = append(nd.Engines, p.engine(item, fmt.Sprintf("%s[%d]", field, i)))
	}
}

// engine reads one item of an `engines:` list.
func (p *parser) engine(item *yaml.Node, field string) Engine {
	e := Engine{Weight: 1, Line: item.Line}
	if item.Kind == yaml.ScalarNode && item.Tag == "!!null" {
		return e // `- ` alone: an engine with nothing given
	}
	f, ok := p.fields(item, field, "cpus", "weight", "host")
	if !ok {
		return e
	}
	if c := f["cpus"]; c != nil && c.Kind == yaml.ScalarNode && strings.Contains(c.Value, ".") {
		share, err := strconv.ParseFloat(c.Value, 64)
		if err != nil || !(share > 0) || share > MaxShare {
			p.fail(c, field+".cpus", fmt.Sprintf("%q is not a share of cores", c.Value),
				fmt.Sprintf("give a share with a decimal point, above 0 and at most %d (e.g. 0.5 or 1.0), or CPU numbers without one", MaxShare))
		}
		e.Share = share
	} else if c != nil {
		cpus, err := ParseCPUs(c.Value)
		if err != nil || c.Kind != yaml.ScalarNode {
			p.fail(c, field+".cpus", fmt.Sprintf("%q is not a list of CPUs", c.Value),
				fmt.Sprintf("give CPU numbers (0 to %d) and ranges as the kernel writes them, e.g. 2 or \"0-3,6\"", MaxCPU))
		}
		e.CPUs = cpus
	}
	if w := f["weight"]; w != nil {
		n, err := strconv.Atoi(w.Value)
		if err != nil || w.Kind != yaml.ScalarNode || n < 1 || n > MaxWeight {
			p.fail(w, field+".weight", fmt.Sprintf("%q is not a weight", w.Value), fmt.Sprintf("give a whole number from 1 to %d", MaxWeight))
		} else {
			e.Weight, e.weightGiven, e.weightLine = n, true, w.Line
		}
	}
	if h := f["host"]; h != nil {
		e.Host, _ = p.str(h, field+".host")
		e.hostLine = h.Line
	}
	return e
}

// ParseCPUs reads a CPU list as the kernel writes it ("0-3,6"; a single number is a list of one),
// sorted, each CPU once.
func ParseCPUs(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b > MaxCPU {
			return nil, fmt.Errorf("%q is not a CPU list", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// dispatch reads a node's `dispatch:`: a mode, or a mapping with mode and the flow's fields.
func (p *parser) dispatch(nd *Node, v *yaml.Node, field string) {
	d := &Dispatch{Line: v.Line}
	nd.Dispatch = d
	if v.Kind == yaml.ScalarNode {
		d.Mode = v.Value
		p.checkMode(v, field, d.Mode)
		return
	}
	f, ok := p.fields(v, field, "mode", "fields", "offset", "length")
	if !ok {
		return
	}
	d.Mode = DispatchFlow
	if m := f["mode"]; m != nil {
		d.Mode, _ = p.str(m, field+".mode")
		p.checkMode(m, field+".mode", d.Mode)
	}
	if fl := f["fields"]; fl != nil {
		p.flowFields(d, fl, field+".fields")
	}
	for _, k := range []string{"offset", "length"} {
		if n := f[k]; n != nil {
			v, err := strconv.Atoi(n.Value)
			if err != nil || n.Kind != yaml.ScalarNode || v < 0 || k == "length" && (v < 1 || v > MaxFlowBytes) || v >= MaxFlowEnd {
				p.fail(n, field+"."+k, fmt.Sprintf("%q is not a byte %s", n.Value, k),
					fmt.Sprintf("give offset from 0 and length from 1 to %d, the key within the frame's first %d bytes", MaxFlowBytes, MaxFlowEnd))
				continue
			}
			if k == "offset" {
				d.Offset = v
			} else {
				d.Length = v
			}
		}
	}
	p.checkFlowBytes(d, f, field)
}

func (p *parser) checkMode(at *yaml.Node, field, mode string) {
	if !slices.Contains(dispatchModes, mode) {
		p.fail(at, field, fmt.Sprintf("unknown dispatch %q", mode), "use one of: "+strings.Join(dispatchModes, ", "))
	}
}

// flowFields reads the IP header fields a flow dispatch hashes.
func (p *parser) flowFields(d *Dispatch, fl *yaml.Node, field string) {
	names, at, _ := p.strs(fl, field)
	if fl.Kind == yaml.SequenceNode && len(fl.Content) == 0 {
		p.fail(fl, field, "no fields given", "name at least one of: "+strings.Join(FlowFields, ", ")+", or remove fields for all of them")
	}
	for i, name := range names {
		switch {
		case !slices.Contains(FlowFields, name):
			p.fail(at[i], fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("unknown flow field %q", name), "use some of: "+strings.Join(FlowFields, ", "))
		case slices.Contains(d.Fields, name):
			p.fail(at[i], fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("flow field %q given twice", name), "keep only one")
		default:
			d.Fields = append(d.Fields, name)
		}
	}
	if len(d.Fields) == 0 {
		d.Fields = nil
	}
}

// checkFlowBytes checks that offset and length come together and fit in the frame's start.
func (p *parser) checkFlowBytes(d *Dispatch, f map[string]*yaml.Node, field string) {
	off, length := f["offset"], f["length"]
	switch {
	case off != nil && length == nil:
		p.fail(off, field+".offset", "offset without length", "add `length:` (1 to 16 bytes), or remove offset")
	case length != nil && off == nil:
		p.fail(length, field+".length", "length without offset", "add `offset:` (bytes from the frame's start), or remove length")
	case d.Length > 0 && d.Offset+d.Length > MaxFlowEnd:
		p.fail(length, field+".length", fmt.Sprintf("bytes %d to %d lie beyond the frame's first %d", d.Offset, d.Offset+d.Length, MaxFlowEnd),
			fmt.Sprintf("keep offset + length at most %d", MaxFlowEnd))
	}
	if (off != nil || length != nil || f["fields"] != nil) && d.Mode != DispatchFlow && slices.Contains(dispatchModes, d.Mode) {
		at, key := f["fields"], "fields"
		if at == nil {
			at, key = off, "offset"
			if at == nil {
				at, key = length, "length"
			}
		}
		p.fail(at, field+"."+key, "flow fields with dispatch "+d.Mode, "remove "+key+", or use `mode: flow`")
	}
}

// validateEngines checks a node's engines and dispatch against each other and the hosts.
func (p *parser) validateEngines(n *Network, nd *Node) {
	if len(nd.Engines) > 0 {
		k, _ := nodeKinds.lookup(nd.Kind)
		p.takes(n, nd, k, KeyEngines, Refusal{"engines need a node of kind " + DefaultNodeKind + " or a VM kind, not " + nd.Kind,
			"remove engines, or the node's kind"})
	}
	if nd.Dispatch != nil && len(nd.Engines) == 0 {
		p.add(n.NodeError(nd, "dispatch", "dispatch without engines", "add `engines: N`, or remove dispatch"))
	}
	for i, e := range nd.Engines {
		field := fmt.Sprintf("nodes.%s.engines[%d]", nd.Name, i)
		if e.weightGiven && nd.Dispatch != nil && nd.Dispatch.Mode != DispatchWeighted {
			p.add(&Error{File: n.File, Line: e.weightLine, Field: field + ".weight", Msg: "a weight counts only with `dispatch: weighted`",
				Fix: "set `dispatch: weighted`, or remove the weight"})
		}
		if e.Host == "" || p.hostsBad {
			continue
		}
		hf := &Error{File: n.File, Line: e.hostLine, Field: field + ".host"}
		switch {
		case p.cluster:
			hf.Msg = "an engine's machine is chosen in a file with `hosts:`, not yet in a cluster"
			hf.Fix = "remove host (the engine runs on its node's machine)"
		case n.Host(e.Host) == nil:
			hf.Msg, hf.Fix = fmt.Sprintf("no host named %q", e.Host), "name a machine declared under hosts"
		default:
			continue // on another machine than its node: reached through a tunnel (docs/engines.md)
		}
		p.add(hf)
	}
}

// engineDefaults fills in the dispatch of a node with engines: flow over every field.
func engineDefaults(nd *Node) {
	if len(nd.Engines) == 0 {
		return
	}
	if nd.Dispatch == nil {
		nd.Dispatch = &Dispatch{Mode: DispatchFlow, Line: nd.FieldLine("engines")}
	}
	if nd.Dispatch.Mode == DispatchFlow && len(nd.Dispatch.Fields) == 0 {
		nd.Dispatch.Fields = slices.Clone(FlowFields)
	}
}

// engineInvariants checks what CheckInvariants needs of a node's engines and dispatch.
func engineInvariants(nd *Node) error {
	if len(nd.Engines) == 0 {
		if nd.Dispatch != nil {
			return fmt.Errorf("dispatch without engines")
		}
		return nil
	}
	d := nd.Dispatch
	switch {
	case len(nd.Engines) > MaxEngines:
		return fmt.Errorf("%d engines", len(nd.Engines))
	case d == nil || !slices.Contains(dispatchModes, d.Mode):
		return fmt.Errorf("engines without a known dispatch")
	case d.Mode == DispatchFlow && len(d.Fields) == 0:
		return fmt.Errorf("flow dispatch without fields")
	case d.Mode != DispatchFlow && (len(d.Fields) > 0 || d.Length > 0):
		return fmt.Errorf("flow fields with dispatch %s", d.Mode)
	case d.Length < 0 || d.Length > MaxFlowBytes || d.Offset < 0 || d.Offset+d.Length > MaxFlowEnd:
		return fmt.Errorf("flow bytes %d+%d", d.Offset, d.Length)
	}
	for _, f := range d.Fields {
		if !slices.Contains(FlowFields, f) {
			return fmt.Errorf("flow field %q", f)
		}
	}
	for i, e := range nd.Engines {
		if e.Weight < 1 || e.Weight > MaxWeight {
			return fmt.Errorf("engine %d: weight %d", i, e.Weight)
		}
		if e.Share < 0 || e.Share > MaxShare || (e.Share > 0 && len(e.CPUs) > 0) {
			return fmt.Errorf("engine %d: share %g with cpus %v", i, e.Share, e.CPUs)
		}
		for _, c := range e.CPUs {
			if c < 0 || c > MaxCPU {
				return fmt.Errorf("engine %d: cpu %d", i, c)
			}
		}
	}
	return nil
}
