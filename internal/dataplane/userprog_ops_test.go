package dataplane

import (
	"bytes"
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
		got, err := ParseHex(tc.in)
		if (err != nil) != tc.err || !bytes.Equal(got, tc.want) {
			t.Errorf("ParseHex(%q) = %x, %v; want %x, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
