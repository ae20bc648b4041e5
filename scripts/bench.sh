#!/usr/bin/env bash
# Runs trellis-bench and writes its figures: the full run regenerates docs/benchmarks.md and the
# plots and JSON in docs/benchmarks/. With --quick (every part, fewer and shorter trials, under
# two minutes) it writes to bench-results/ instead and leaves docs/ alone. Other arguments go to
# trellis-bench (see `bin/trellis-bench --help`). Run as root on Debian 12; it installs what it
# needs first. The machine should be otherwise idle: other work shows as noise in the figures.
# A run that is killed leaves its setups behind until the next run, or `bin/trellis-bench clean`,
# removes them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

# Beyond setup.sh: iperf3 (isolation part), Mininet (deploy part, compared in the same run),
# perf (profile part: where the forwarding CPU's time goes) and iproute2 (the tunnel setups run
# trellis in simulated machines with `ip netns exec`).
packages=(iperf3 mininet util-linux linux-perf iproute2)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

out=docs/benchmarks
page=docs/benchmarks.md
for a in "$@"; do
	if [ "$a" = "--quick" ]; then
		out=bench-results
		page=bench-results/benchmarks.md
	fi
done
mkdir -p "$out"
bin/trellis-bench --out "$out" --markdown "$page" "$@"
echo "bench: wrote $page, $out/bench.json and the plots in $out/"
