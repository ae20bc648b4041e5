package cli

import (
	"strings"
	"testing"
)

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
