// Package all registers every kind trellis has: import it for its side effects.
package all

import (
	_ "github.com/trellisnet/trellis/internal/kinds/bridge"      // link kind "bridge"
	_ "github.com/trellisnet/trellis/internal/kinds/container"   // node kind "container"
	_ "github.com/trellisnet/trellis/internal/kinds/egre"        // tunnel kind "egre"
	_ "github.com/trellisnet/trellis/internal/kinds/lan"         // link kind "lan"
	_ "github.com/trellisnet/trellis/internal/kinds/shortbridge" // link kind "shortbridge"
	_ "github.com/trellisnet/trellis/internal/kinds/veth"        // link kind "veth"
	_ "github.com/trellisnet/trellis/internal/kinds/vm"          // node kind "vm"
	_ "github.com/trellisnet/trellis/internal/kinds/vxlan"       // tunnel kind "vxlan"
)
