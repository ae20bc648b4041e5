package spec

import (
	"testing"
	"time"
)

func TestParseLANTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		links  string // the links: section of a file with nodes a, b, c
		table  int
		ageing time.Duration
	}{
		{"defaults", "  - endpoints: [a:eth1, b:eth1, c:eth1]\n", 0, 0},
		{"both", "  - endpoints: [a:eth1, b:eth1, c:eth1]\n    table: 64\n    ageing: 30s\n", 64, 30 * time.Second},
		{"bounds", "  - endpoints: [a:eth1, b:eth1]\n    connector: lan\n    table: 1048576\n    ageing: 24h\n", MaxLANTable, MaxLANAgeing},
		{"ageing alone", "  - endpoints: [a:eth1, b:eth1]\n    connector: lan\n    ageing: 1s\n", 0, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Parse("topo.yaml", []byte("name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n"+tc.links))
			if err != nil {
				t.Fatal(err)
			}
			if l := n.Links[0]; l.Table != tc.table || l.Ageing != tc.ageing {
				t.Fatalf("table %d, ageing %v; want %d, %v", l.Table, l.Ageing, tc.table, tc.ageing)
			}
		})
	}
}

func TestParseLANTableErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links string
		want  []string
	}{
		{"bad values", "  - endpoints: [a:eth1, b:eth1, c:eth1]\n    table: 0\n    ageing: 10\n  - endpoints: [a:eth2, b:eth2, c:eth2]\n    table: 2097152\n    ageing: 500ms\n", []string{
			`topo.yaml:5: links[0].table: "0" is not a table size; give the number of addresses the LAN learns, from 1 to 1048576`,
			`topo.yaml:6: links[0].ageing: "10" is not an ageing time; give a duration from 1s to 24h0m0s, such as 300s or 5m`,
			`topo.yaml:8: links[1].table: "2097152" is not a table size; give the number of addresses the LAN learns, from 1 to 1048576`,
			`topo.yaml:9: links[1].ageing: "500ms" is not an ageing time; give a duration from 1s to 24h0m0s, such as 300s or 5m`,
		}},
		{"other connector", "  - endpoints: [a:eth1, b:eth1]\n    table: 64\n    ageing: 1m\n  - endpoints: [a:eth2, b:eth2, c:eth2]\n    connector: bridge\n    ageing: 1m\n", []string{
			"topo.yaml:5: links[0].table: table is a setting of the lan connector's forwarding table, and this link's connector is shortbridge; remove table, or give the link `connector: lan`",
			"topo.yaml:6: links[0].ageing: ageing is a setting of the lan connector's forwarding table, and this link's connector is shortbridge; remove ageing, or give the link `connector: lan`",
			"topo.yaml:9: links[1].ageing: ageing is a setting of the lan connector's forwarding table, and this link's connector is bridge; remove ageing, or give the link `connector: lan`",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, "name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n"+tc.links, tc.want)
		})
	}
}
