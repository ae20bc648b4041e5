// Command trellis-node-init is the init of trellis's container nodes (package nodeinit). It is
// not installed: trellis embeds it (`go generate ./internal/node` builds it) and starts it from
// memory.
package main

import "github.com/trellisnet/trellis/internal/node/nodeinit"

func main() { nodeinit.Main() }
