#!/bin/sh
# Makes examples/rootfs/root: a Debian bookworm root file system (minbase) with iproute2,
# ping and traceroute, which the host need not have, for the node h1 of rootfs.yaml.
# Needs mmdebstrap (apt-get install mmdebstrap) and access to Debian's mirror; run as root.
set -eu
dir=$(dirname "$0")/root
if [ -e "$dir" ]; then
	echo "$dir exists: remove it first to make it again" >&2
	exit 1
fi
mmdebstrap --variant=minbase --include=iproute2,iputils-ping,traceroute bookworm "$dir"
chmod 755 "$dir"
echo "made $dir; now: bin/trellis up examples/rootfs/rootfs.yaml"
