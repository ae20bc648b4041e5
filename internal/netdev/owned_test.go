package netdev

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestStale(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	cases := []struct {
		name         string
		placed, want []string
		stale        []netip.Prefix
	}{
		{"nothing placed: nothing to remove (zebra's addresses are never listed)", nil, []string{"10.0.0.1/24"}, nil},
		{"unchanged", []string{"10.0.0.1/24", "fd00::1/64"}, []string{"10.0.0.1/24", "fd00::1/64"}, nil},
		{"one removed from the file", []string{"10.0.0.1/24", "fd00::1/64"}, []string{"10.0.0.1/24"}, pp("fd00::1/64")},
		{"all removed", []string{"10.0.0.1/24"}, nil, pp("10.0.0.1/24")},
		{"other spelling is the same address", []string{"fd00:0::1/64"}, []string{"fd00::1/64"}, nil},
		{"prefix length changed", []string{"10.0.0.1/24"}, []string{"10.0.0.1/25"}, pp("10.0.0.1/24")},
		{"placed twice (two recorded plans)", []string{"10.0.0.1/24", "10.0.0.1/24"}, nil, pp("10.0.0.1/24")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Stale(c.placed, c.want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.stale) {
				t.Fatalf("Stale(%v, %v) = %v, want %v", c.placed, c.want, got, c.stale)
			}
		})
	}
	if _, err := Stale([]string{"10.0.0.1"}, nil); err == nil {
		t.Fatal("an address without a prefix length was taken")
	}
}

func TestSharesSubnet(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	p := netip.MustParsePrefix("10.0.9.1/24")
	cases := []struct {
		name       string
		have, gone []netip.Prefix
		want       bool
	}{
		{"alone", pp("10.0.9.1/24"), nil, false},
		{"a node's address in the subnet", pp("10.0.9.1/24", "10.0.9.50/24"), nil, true},
		{"it goes too", pp("10.0.9.1/24", "10.0.9.50/24"), pp("10.0.9.50/24"), false},
		{"another subnet", pp("10.0.9.1/24", "10.0.8.50/24"), nil, false},
		{"another prefix length", pp("10.0.9.1/24", "10.0.9.50/25"), nil, false},
		{"IPv6 is never flushed so", pp("10.0.9.1/24", "fd00::1/64"), nil, false},
	}
	for _, c := range cases {
		if got := shares(p, c.have, c.gone); got != c.want {
			t.Errorf("%s: shares = %v, want %v", c.name, got, c.want)
		}
	}
}
