#!/usr/bin/env bash
# Installs what trellis needs, builds it, brings up the OSPF ring example (four BIRD routers)
# and shows it converged: every router pings every other router's loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
trellis=$PWD/bin/trellis
$trellis up examples/ospf-ring/ring.yaml
$trellis inspect ospf-ring
examples/ospf-ring/check.sh "$trellis" /var/lib/trellis
echo
echo "The ring is up. Try: $trellis exec ospf-ring r1 -- birdc -s /run/bird/bird.ctl show route"
echo "Remove it with:      $trellis down ospf-ring"
