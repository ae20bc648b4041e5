package noderuntime

import (
	"bufio"
	"strings"
	"testing"
)

func TestReadReady(t *testing.T) {
	cases := []struct {
		in, err string
	}{
		{"ok\n", ""},
		{"error: /proc: permission denied\n", "/proc: permission denied"},
		{"", "node init exited before it was ready"},          // the init died first
		{"garbage\n", "node init exited before it was ready"}, // never "ok"
	}
	for _, c := range cases {
		err := readReady(bufio.NewReader(strings.NewReader(c.in)))
		if got := ""; err != nil {
			got = err.Error()
			if got != c.err {
				t.Errorf("readReady(%q) = %q, want %q", c.in, got, c.err)
			}
		} else if c.err != "" {
			t.Errorf("readReady(%q) = nil, want %q", c.in, c.err)
		}
	}
}
