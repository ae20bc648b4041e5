package spec

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Capacity is what a machine offers, or a node needs, for placement: CPU cores, memory in
// bytes, and (machines) the NIC's rate in bits per second. Zero means not given: a machine
// without a figure is not limited in it, a node without one needs none of it.
type Capacity struct {
	CPU    float64 `json:",omitempty"`
	Memory uint64  `json:",omitempty"`
	Rate   uint64  `json:",omitempty"`
}

// IsZero tells whether no figure is given.
func (c Capacity) IsZero() bool { return c == Capacity{} }

var memoryRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([kmgt]?)(?:i?b)?$`)

// ParseMemory reads a memory size: bytes, or with a unit k, M, G or T (powers of 1024; "Mi",
// "MB" and "MiB" are read the same), e.g. 512M, 2G.
func ParseMemory(s string) (uint64, error) {
	m := memoryRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil || m[2] == "" && strings.Contains(m[1], ".") { // no fractions of a byte
		return 0, fmt.Errorf("%q is not a memory size", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	v *= math.Pow(1024, float64(strings.Index("_kmgt", m[2]))) // "" is at 0
	if v < 1 || v > 1<<50 {
		return 0, fmt.Errorf("memory size %q is out of range", s)
	}
	return uint64(v), nil
}

// capacity reads the cpu, memory and rate fields of a machine or node; rate only for a
// machine (nic true).
func (p *parser) capacity(f map[string]*yaml.Node, field string, nic bool) Capacity {
	var c Capacity
	if v := f["cpu"]; v != nil {
		cpu, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || v.Kind != yaml.ScalarNode || cpu <= 0 || cpu > 4096 || math.IsNaN(cpu) {
			p.fail(v, field+".cpu", fmt.Sprintf("%q is not a number of CPU cores", v.Value), "give cores as a positive number, e.g. 2 or 0.5")
		} else {
			c.CPU = cpu
		}
	}
	if v := f["memory"]; v != nil {
		mem, err := ParseMemory(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode {
			p.fail(v, field+".memory", fmt.Sprintf("%q is not a memory size", v.Value), "give bytes with a unit, e.g. 512M or 8G")
		} else {
			c.Memory = mem
		}
	}
	if v := f["rate"]; v != nil && nic {
		rate, err := ParseRate(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode {
			p.fail(v, field+".rate", fmt.Sprintf("%q is not a rate", v.Value), "give the NIC's rate as tc writes it, e.g. 10gbit")
		} else {
			c.Rate = rate
		}
	}
	return c
}
