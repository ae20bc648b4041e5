package metrics

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// The live metrics are written in the Prometheus text format (version 0.0.4) directly, not
// through client_golang's registry: a 1000-node network has some 20 000 series, and making a
// const metric of each, then sorting and encoding them, took most of a scrape's time.

const (
	gauge   = "gauge"
	counter = "counter"
)

// family is one metric name: its help, type and label names.
type family struct {
	name, typ, help string
	labels          []string
	order           []int // label indexes in name order, as Prometheus writes them
}

func newFamily(name, typ, help string, labels ...string) *family {
	f := &family{name: name, typ: typ, help: help, labels: labels}
	f.order = make([]int, len(labels))
	for i := range f.order {
		f.order[i] = i
	}
	slices.SortFunc(f.order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return f
}

// samples are the lines of each family that one scrape read.
type samples map[*family]*bytes.Buffer

// add writes one sample of family f, with label values in f.labels' order.
func (s samples) add(f *family, v uint64, values ...string) {
	b := s.buf(f)
	b.WriteString(f.name)
	writeLabels(b, f, values)
	b.WriteByte(' ')
	b.Write(strconv.AppendUint(b.AvailableBuffer(), v, 10))
	b.WriteByte('\n')
}

// addFloat writes one sample of family f whose value is not a whole number.
func (s samples) addFloat(f *family, v float64, values ...string) {
	b := s.buf(f)
	b.WriteString(f.name)
	writeLabels(b, f, values)
	b.WriteByte(' ')
	b.Write(strconv.AppendFloat(b.AvailableBuffer(), v, 'g', -1, 64))
	b.WriteByte('\n')
}

func (s samples) buf(f *family) *bytes.Buffer {
	b := s[f]
	if b == nil {
		b = &bytes.Buffer{}
		s[f] = b
	}
	return b
}

func writeLabels(b *bytes.Buffer, f *family, values []string) {
	if len(f.labels) == 0 {
		return
	}
	b.WriteByte('{')
	for i, li := range f.order {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.labels[li])
		b.WriteString(`="`)
		escapeValue(b, values[li])
		b.WriteByte('"')
	}
	b.WriteByte('}')
}

// escapeValue writes a label value with backslash, double quote and newline escaped.
func escapeValue(b *bytes.Buffer, v string) {
	if !strings.ContainsAny(v, "\\\"\n") {
		b.WriteString(v)
		return
	}
	for _, r := range v {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
}

// writeTo writes the families that have samples, each with its HELP and TYPE, in the order of
// families.
func (s samples) writeTo(w *bytes.Buffer) {
	for _, f := range families {
		b := s[f]
		if b == nil {
			continue
		}
		w.WriteString("# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.typ + "\n")
		w.Write(b.Bytes())
	}
}
