package dataplane

import (
	"time"
)

// EncapRouteTTL is how long each CPU's encapsulation program reuses the outer Ethernet header
// (source and destination MAC, underlay device) it prepared from a route lookup before it
// looks the route up again: route and neighbour changes on the underlay reach a tunnel within
// this time, and the frames in between pay no route lookup. A next hop whose MAC address is not
// known yet is never kept: every frame asks again until it is.
const EncapRouteTTL = time.Second

// EncapRouteEnv names the environment variable from which the command line takes
// Config.PerFrameRoute ("per-frame"): the bench's setup egre-shortbridge-fib measures that
// path for comparison.
const EncapRouteEnv = "TRELLIS_EGRE_ROUTE"

// encapRouteTTL is the template's lifetime for programs that c attaches: 0 means a route lookup
// per frame.
func (c Config) encapRouteTTL() time.Duration {
	if c.PerFrameRoute {
		return 0
	}
	return EncapRouteTTL
}
