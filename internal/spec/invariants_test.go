package spec

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// CheckInvariants must catch each kind of broken network a hand-built or buggy caller could
// make; otherwise the fuzz test could not fail.
func TestCheckInvariantsCatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		doc     int // index in validDocs
		breakIt func(n *Network)
		want    string
	}{
		{"network name", 0, func(n *Network) { n.Name = "a b" }, `network name "a b"`},
		{"node used twice", 0, func(n *Network) { n.Nodes = append(n.Nodes, n.Nodes[0]) }, `node name "a" invalid or used twice`},
		{"node kind", 0, func(n *Network) { n.Nodes[0].Kind = "" }, `kind "" not registered`},
		{"node host", 0, func(n *Network) { n.Nodes[0].Host = "m9" }, `host "m9" not declared`},
		{"address", 0, func(n *Network) { n.Nodes[0].Addresses["eth1"] = []string{"10.0.0.1"} }, `address "10.0.0.1"`},
		{"address without link", 0, func(n *Network) { n.Nodes[0].Addresses["eth9"] = nil }, `addresses on eth9, which no link has`},
		{"file path", 0, func(n *Network) { n.Nodes[0].Files = []File{{Path: "/usr/x"}} }, `file "/usr/x"`},
		{"sysctl", 0, func(n *Network) { n.Nodes[0].Sysctl["kernel.panic"] = "1" }, `sysctl "kernel.panic"`},
		{"default sysctl", 0, func(n *Network) { delete(n.Nodes[0].Sysctl, "net.ipv4.ip_forward") }, `default sysctl net.ipv4.ip_forward missing`},
		{"empty link name", 0, func(n *Network) { n.Links[0].Name = "" }, `link name "" neither valid nor derived`},
		{"link name used twice", 0, func(n *Network) { n.Links[1].Name = n.Links[0].Name }, `used twice`},
		{"missing node", 0, func(n *Network) { n.Links[0].Endpoints[0].Node = "zz" }, `endpoint zz:eth1 on no node`},
		{"ifname too long", 0, func(n *Network) { n.Links[0].Endpoints[0].Ifname = "abcdefghijklmnop" }, `invalid or used twice`},
		{"interface used twice", 0, func(n *Network) { n.Links[1].Endpoints[0] = n.Links[0].Endpoints[0] }, `endpoint b:eth1 on no node, invalid or used twice`},
		{"unknown connector", 0, func(n *Network) { n.Links[0].Connector = "x" }, `on connector "x"`},
		{"too many for the connector", 0, func(n *Network) { n.Links[2].Connector = Shortbridge }, `3 endpoints on connector "shortbridge"`},
		{"one endpoint", 0, func(n *Network) { n.Links[0].Endpoints = n.Links[0].Endpoints[:1]; n.Links[0].Name = "x" }, `1 endpoints`},
		{"mtu", 0, func(n *Network) { n.Links[0].MTU = 20 }, `mtu 20`},
		{"rate without text", 0, func(n *Network) { n.Links[0].Rate = 5 }, `rate 5 from ""`},
		{"rate text disagrees", 2, func(n *Network) { n.Links[0].Rate = 5 }, `rate 5 from "10mbit"`},
		{"state", 0, func(n *Network) { n.Links[0].State = "" }, `state ""`},
		{"loss", 0, func(n *Network) { n.Links[0].Impair.Loss = 101 }, `percentage 101`},
		{"delay", 0, func(n *Network) { n.Links[0].Impair.Delay = -time.Second }, `delay -1s`},
		{"jitter without delay", 0, func(n *Network) { n.Links[1].Impair = Impairment{Jitter: 1, Distribution: "normal"} }, `jitter without delay`},
		{"jitter without distribution", 0, func(n *Network) { n.Links[0].Impair.Distribution = "" }, `distribution "" with jitter 5ms`},
		{"unknown distribution", 0, func(n *Network) { n.Links[0].Impair.Distribution = "x" }, `distribution "x"`},
		{"from not an endpoint", 0, func(n *Network) { n.Links[0].From["c:eth9"] = Impairment{} }, `from "c:eth9", not an endpoint`},
		{"from impairment", 0, func(n *Network) { n.Links[0].From["a:eth1"] = Impairment{Corrupt: -1} }, `from a:eth1: percentage -1`},
		{"hosts without tunnel", 2, func(n *Network) { n.Tunnel = "" }, `tunnel "" with 2 hosts`},
		{"tunnel without hosts", 0, func(n *Network) { n.Tunnel = EGRE }, `tunnel "egre" with 0 hosts`},
		{"host address", 2, func(n *Network) { n.Hosts[1].Address = n.Hosts[0].Address }, `not IPv4 or used twice`},
		{"host address IPv6", 2, func(n *Network) { n.Hosts[1].Address = netip.MustParseAddr("fd00::1") }, `not IPv4 or used twice`},
		{"host mtu", 2, func(n *Network) { n.Hosts[0].MTU = 100 }, `host m1: mtu 100`},
		{"host used twice", 2, func(n *Network) { n.Hosts = append(n.Hosts, n.Hosts[0]) }, `host name "m1" invalid or used twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Parse("topo.yaml", []byte(validDocs[tc.doc]))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckInvariants(n); err != nil {
				t.Fatalf("before breaking it: %v", err)
			}
			tc.breakIt(n)
			err = CheckInvariants(n)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckInvariants = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
