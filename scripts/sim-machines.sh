#!/usr/bin/env bash
# Simulated physical machines on one host, for trying a network spread over several machines.
#
#   scripts/sim-machines.sh up [N]   make machines m1..mN (default 3): network namespaces
#                                    trellis-sim-mI, each with an underlay interface eth0 at
#                                    198.18.0.I/24, all joined by a bridge in trellis-sim-ul
#   scripts/sim-machines.sh down     remove them (run `trellis down` on each machine first)
#
# Run trellis "on" machine mI with: ip netns exec trellis-sim-mI trellis --state-dir /var/lib/trellis-mI ...
set -euo pipefail
ul=trellis-sim-ul

case "${1:-}" in
up)
	n=${2:-3}
	ip netns add $ul
	ip -n $ul link add ul type bridge
	ip -n $ul link set ul up
	for i in $(seq 1 "$n"); do
		m=trellis-sim-m$i
		ip netns add $m
		ip -n $ul link add m$i type veth peer name eth0 netns $m
		ip -n $ul link set m$i master ul up
		ip -n $m addr add 198.18.0.$i/24 dev eth0
		ip -n $m link set eth0 up
		ip -n $m link set lo up
		echo "machine m$i: netns $m, underlay 198.18.0.$i"
	done
	;;
down)
	for m in $(ip netns list | awk '/^trellis-sim-m[0-9]+/ {print $1}'); do
		ip netns del "$m"
	done
	ip netns del $ul 2>/dev/null || true
	;;
*)
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
