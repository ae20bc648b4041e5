// Package clab reads containerlab topology files (`*.clab.yml`) as trellis topologies: the
// part of containerlab's schema trellis can honour (kind linux nodes and their image, binds,
// exec, env, cmd, entrypoint, labels, sysctls and limits; kind bridge as a LAN; links in the
// brief and the veth form; defaults, kinds and groups inheritance) becomes a trellis topology
// file, which internal/spec then parses and checks as any other. Every other key is refused
// with the containerlab file's name, line and key, and why (docs/containerlab.md): nothing is
// silently ignored. Problems the spec layer finds in the converted file are reported at the
// containerlab line they came from.
package clab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// Detect tells whether a topology file is containerlab's: its name ends in .clab.yml or
// .clab.yaml, or its top-level mapping has the key `topology` (which a trellis file never has).
func Detect(path string, data []byte) bool {
	if strings.HasSuffix(path, ".clab.yml") || strings.HasSuffix(path, ".clab.yaml") {
		return true
	}
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return false // not YAML: the trellis parser says where
	}
	_, ok := top["topology"]
	return ok
}

// Load reads a topology file, containerlab's or trellis's (Detect tells which), and parses and
// checks it as a trellis network.
func Load(path string) (*spec.Network, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading topology file: %w", err)
	}
	if !Detect(path, data) {
		return spec.Parse(path, data)
	}
	return Parse(path, data)
}

// Parse converts a containerlab file's content and parses the result as a trellis network.
// Problems come back as spec.Errors naming file (the containerlab file), its lines and keys,
// every one at once; a key this build of trellis has no counterpart for (e.g. `image:` before
// container images) is one of them.
func Parse(file string, data []byte) (*spec.Network, error) {
	c, err := convert(file, data)
	if err != nil {
		return nil, err
	}
	n, err := spec.Parse(file, c.text)
	if err != nil {
		return nil, c.mapErrors(err)
	}
	return n, nil
}

// Convert converts a containerlab file's content into the equivalent trellis topology file and
// checks it as Parse does. A key that this build of trellis cannot run (for which the converted
// file has the key trellis will give it, such as `image:`) is no error here but a note; every
// other problem is.
func Convert(file string, data []byte) (text []byte, notes []string, err error) {
	c, err := convert(file, data)
	if err != nil {
		return nil, nil, err
	}
	if _, err := spec.Parse(file, c.text); err != nil {
		var es spec.Errors
		if !errors.As(c.mapErrors(err), &es) {
			return nil, nil, err
		}
		var other spec.Errors
		for _, e := range es {
			if strings.HasPrefix(e.Msg, unsupportedMsg) {
				notes = append(notes, e.Error())
			} else {
				other = append(other, e)
			}
		}
		if len(other) > 0 {
			return nil, nil, other
		}
	}
	return c.text, notes, nil
}

// converted is a containerlab file turned into a trellis file, with where each of its lines
// came from.
type converted struct {
	file   string
	text   []byte
	origin []origin // by line of text, from 1 (origin[0] is unused)
}

// origin is where a line of the converted file comes from in the containerlab file.
type origin struct {
	line  int
	field string // the containerlab key, e.g. topology.nodes.r1.binds[0]
}

// unsupportedMsg starts the message of a key the converted file gives and this build of
// trellis does not know.
const unsupportedMsg = "this build of trellis has no node key"

// mapErrors turns the spec layer's problems in the converted text into problems at the
// containerlab file's lines and keys.
func (c *converted) mapErrors(err error) error {
	var es spec.Errors
	if !errors.As(err, &es) {
		return err
	}
	var out []*spec.Error
	seen := map[string]bool{} // one problem of an inherited key, not one per node inheriting it
	for _, e := range es {
		o := c.origin[0]
		if e.Line > 0 && e.Line < len(c.origin) {
			o = c.origin[e.Line]
		}
		m := &spec.Error{File: c.file, Line: o.line, Field: o.field, Msg: e.Msg + " (trellis: " + e.Field + ")", Fix: e.Fix}
		if e.Msg == "unknown key" { // the converter gives only keys trellis has, or will have
			key := e.Field[strings.LastIndex(e.Field, ".")+1:]
			m.Msg = fmt.Sprintf("%s `%s`: it cannot run this yet", unsupportedMsg, key)
			m.Fix = "remove it, or use a trellis that has it (docs/containerlab.md)"
		}
		if !seen[m.Error()] {
			seen[m.Error()] = true
			out = append(out, m)
		}
	}
	return sortErrors(out)
}

// yamlLineRE picks the line out of a YAML syntax error, "yaml: line 3: mapping values are ...".
var yamlLineRE = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// convert reads a containerlab file and writes the trellis file; problems in the containerlab
// file come back as spec.Errors.
func convert(file string, data []byte) (*converted, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		e := &spec.Error{File: file, Field: "(file)", Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "),
			Fix: "check the indentation (spaces, not tabs), colons, brackets and quoting near this line"}
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = "not valid YAML: " + m[2]
		}
		return nil, spec.Errors{e}
	}
	r := &reader{file: file}
	lab := r.lab(&doc)
	if len(r.errs) > 0 {
		return nil, sortErrors(r.errs)
	}
	w := &writer{}
	w.network(file, lab)
	return &converted{file: file, text: w.buf.Bytes(), origin: w.origin}, nil
}
