// Package ebpf holds the programs of the examples of nodes that forward with a program of
// their own (docs/ebpf-nodes.md), for the bench's setups that run them.
package ebpf

import _ "embed" // the programs' sources

// L3 is the source of l3/l3.c: IPv4 forwarding by longest-prefix match.
//
//go:embed l3/l3.c
var L3 []byte
