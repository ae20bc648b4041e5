package lan_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	_ "github.com/trellisnet/trellis/internal/kinds/all"
	"github.com/trellisnet/trellis/internal/kinds/lan"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// The LAN's table settings are the kind's (settings.go): spec reads a link's `table:` and
// `ageing:` with the kind's parser, and refuses them on a link of another connector.

func TestParseLANTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		links  string // the links: section of a file with nodes a, b, c
		table  int
		ageing time.Duration
	}{
		{"defaults", "  - endpoints: [a:eth1, b:eth1, c:eth1]\n", 0, 0},
		{"both", "  - endpoints: [a:eth1, b:eth1, c:eth1]\n    table: 64\n    ageing: 30s\n", 64, 30 * time.Second},
		{"bounds", "  - endpoints: [a:eth1, b:eth1]\n    connector: lan\n    table: 1048576\n    ageing: 24h\n", lan.MaxTable, lan.MaxAgeing},
		{"ageing alone", "  - endpoints: [a:eth1, b:eth1]\n    connector: lan\n    ageing: 1s\n", 0, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := spec.Parse("topo.yaml", []byte("name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n"+tc.links))
			if err != nil {
				t.Fatal(err)
			}
			var got lan.Settings
			if s, ok := n.Links[0].KindSettings().(*lan.Settings); ok {
				got = *s
			}
			if got.Table != tc.table || got.Ageing != tc.ageing {
				t.Fatalf("table %d, ageing %v; want %d, %v", got.Table, got.Ageing, tc.table, tc.ageing)
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
			_, err := spec.Parse("topo.yaml", []byte("name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n"+tc.links))
			if want := strings.Join(tc.want, "\n"); err == nil || err.Error() != want {
				t.Errorf("errors\n%v\nwant\n%s", err, want)
			}
		})
	}
}

// TestSettingsInRecord: a plan's link keeps the table settings among its own fields, so that a
// record written before they moved into the kind (5ddc709's, below) reads back with them, and
// the link compares equal (substrate's sameLink: their JSON) to the same link planned anew:
// an `up` of an unchanged file leaves the LAN alone.
func TestSettingsInRecord(t *testing.T) {
	const old = `{"Name":"a:eth1--b:eth1--c:eth1","Connector":"lan","Rate":0,"MTU":0,"Down":false,"Device":"tr9c320eb3","Table":64,"Ageing":30000000000,` +
		`"Ports":[{"Node":"a","Ifname":"eth1","Name":"tr9c320ep0","MAC":"26:a7:50:0f:f2:a0"},{"Node":"b","Ifname":"eth1","Name":"tr9c320ep1","MAC":"86:7d:e1:be:33:28"},` +
		`{"Node":"c","Ifname":"eth1","Name":"tr9c320ep2","MAC":"de:a0:0b:cb:39:d9"}]}`
	n, err := spec.Parse("topo.yaml", []byte("name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n  - endpoints: [a:eth1, b:eth1, c:eth1]\n    table: 64\n    ageing: 30s\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(n, "scope", "", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	var recorded plan.Link
	if err := json.Unmarshal([]byte(old), &recorded); err != nil {
		t.Fatal(err)
	}
	if s, ok := recorded.KindSettings().(*lan.Settings); !ok || *s != (lan.Settings{Table: 64, Ageing: 30 * time.Second}) {
		t.Errorf("recorded settings %+v, want table 64, ageing 30s", recorded.KindSettings())
	}
	a, _ := json.Marshal(&recorded)
	b, _ := json.Marshal(p.Links[0])
	if string(a) != string(b) || !strings.Contains(string(b), `"Table":64,"Ageing":30000000000`) {
		t.Errorf("the recorded link marshals to\n%s\nthe planned one to\n%s\nwant the same, with the settings among the link's fields", a, b)
	}
}
