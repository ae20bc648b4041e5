package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseHex(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
		err  bool
	}{
		{"0a000201", []byte{10, 0, 2, 1}, false},
		{"0x0a000201", []byte{10, 0, 2, 1}, false},
		{"0a:00:02:01", []byte{10, 0, 2, 1}, false},
		{"18000000.0a000200", []byte{0x18, 0, 0, 0, 10, 0, 2, 0}, false},
		{"AB-cd_EF", []byte{0xab, 0xcd, 0xef}, false},
		{"abc", nil, true},
		{"zz", nil, true},
		{"", nil, true},
		{"0x", nil, true},
	}
	for _, tc := range tests {
		got, err := parseHex(tc.in)
		if (err != nil) != tc.err || !bytes.Equal(got, tc.want) {
			t.Errorf("parseHex(%q) = %x, %v; want %x, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestTableArgs(t *testing.T) {
	tests := []struct {
		args string
		err  string
	}{
		{"net s1", ""},
		{"net s1 routes", ""},
		{"net s1 routes dump", ""},
		{"net s1 routes get 0a", ""},
		{"net s1 routes set 0a 0b", ""},
		{"net s1 routes del 0a", ""},
		{"net", "give NETWORK NODE"},
		{"net s1 routes put 0a", `"put": give get KEY`},
		{"net s1 routes get", "takes 1 argument"},
		{"net s1 routes set 0a", "takes 2 argument"},
		{"net s1 routes dump 0a", "takes 0 argument"},
		{"net s1 routes get 0g", "is not hex bytes"},
	}
	for _, tc := range tests {
		err := tableArgs(nil, strings.Fields(tc.args))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("tableArgs(%s) = %v, want %q", tc.args, err, tc.err)
		}
	}
}
