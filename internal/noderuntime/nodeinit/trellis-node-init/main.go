// Command trellis-node-init is the init of trellis's container nodes (package nodeinit). It is
// not installed: trellis embeds it (`go generate ./internal/noderuntime` builds it) and starts it from
// memory.
package main

import "github.com/trellisnet/trellis/internal/noderuntime/nodeinit"

// The program runs from its package initialiser, on the process's main thread (nodeinit.Main).
func init() { nodeinit.Main() }

func main() {}
