package spec

import (
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{{"512", 512}, {"1k", 1024}, {"512M", 512 << 20}, {"1.5G", 3 << 29}, {"2GiB", 2 << 30}, {"8gb", 8 << 30}, {"1T", 1 << 40}} {
		if got, err := ParseMemory(c.in); err != nil || got != c.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "M", "-1G", "1X", "0", "1.5", "2 G"} {
		if got, err := ParseMemory(bad); err == nil {
			t.Errorf("ParseMemory(%q) = %d, want an error", bad, got)
		}
	}
}

func TestCapacityErrors(t *testing.T) {
	doc := "name: x\nhosts:\n  m1: {address: 198.18.0.1, cpu: many, memory: lots, rate: fast}\nnodes:\n  a: {cpu: -1, memory: 1X, host: m1}\n  b:\nlinks:\n  - endpoints: [a:e1, b:e1]\n"
	_, err := Parse("topo.yaml", []byte(doc))
	for _, want := range []string{"topo.yaml:3: hosts.m1.cpu:", "topo.yaml:3: hosts.m1.memory:", "topo.yaml:3: hosts.m1.rate:",
		"topo.yaml:5: nodes.a.cpu:", "topo.yaml:5: nodes.a.memory:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors %v; want one at %s", err, want)
		}
	}
}
