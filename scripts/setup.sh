#!/usr/bin/env bash
# Installs what trellis, its examples and its tests need on Debian 12, then builds trellis into
# bin/trellis and the bench into bin/trellis-bench. Run as root. Safe to run again: it installs
# only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

GO_WANT=1.26   # the go directive of go.mod
GO_FALLBACK=go1.26.8

# ethtool: TestEGRE turns the GRE device's segmentation offload off. clang: eBPF nodes compile their programs.
packages=(iproute2 util-linux bsdutils iputils-ping bird2 frr iperf3 python3 nftables tcpdump ca-certificates gcc libc6-dev ethtool clang)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# VM nodes (kind: vm): QEMU, without the GUI it recommends, qemu-img (qemu-utils: the overlay
# of a disk image) and the static busybox that their guest image holds (TestRootfs also builds
# a node's own root directory from it). kmod: depmod for the guest kernels of TestGuestKernel
# (docs/guest-kernel.md), and the guest's modprobe.
vm_missing=()
for p in qemu-system-x86 qemu-utils busybox-static kmod; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || vm_missing+=("$p")
done
if [ ${#vm_missing[@]} -gt 0 ]; then
	echo "setup: installing ${vm_missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${vm_missing[@]}" >/dev/null
fi

# Go: use the machine's if it is new enough; otherwise Debian's go, which fetches a newer Go
# toolchain through the Go module proxy.
export PATH=$PATH:/usr/local/go/bin:/root/go/bin
go_ok() {
	command -v go >/dev/null 2>&1 || return 1
	local v; v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
	[ "$(printf '%s\n%s\n' "$GO_WANT" "$v" | sort -V | head -1)" = "$GO_WANT" ]
}
if ! go_ok; then
	echo "setup: Go >= $GO_WANT not found; fetching $GO_FALLBACK through the Go module proxy"
	command -v go >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
	mod="golang.org/toolchain@v0.0.1-$GO_FALLBACK.linux-$(dpkg --print-architecture)"
	dir=$(cd /tmp && GOFLAGS=-modcacherw GO111MODULE=on go mod download -json "$mod" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	export PATH="$dir/bin:$PATH"
	go_ok || { echo "setup: could not get Go $GO_WANT" >&2; exit 1; }
fi

mkdir -p bin
CGO_ENABLED=0 go build -o bin/trellis ./cmd/trellis
# The bench (scripts/bench.sh) is a command of its own; it runs bin/trellis beside it.
CGO_ENABLED=0 go build -o bin/trellis-bench ./cmd/trellis-bench
echo "setup: built bin/trellis and bin/trellis-bench with $(go env GOVERSION)"

# etcd for clusters (docs/cluster.md) and their tests: the server at the version tools/etcd/go.mod
# pins (Debian's is 3.4), built once into the cache directory; TRELLIS_ETCD names the binary.
etcd_version=$(sed -n 's#^require go.etcd.io/etcd/server/v3 \(v[0-9.]*\)$#\1#p' tools/etcd/go.mod)
[ -n "$etcd_version" ] || { echo "setup: no etcd version in tools/etcd/go.mod" >&2; exit 1; }
export TRELLIS_ETCD=${TRELLIS_CACHE:-/var/cache/trellis}/etcd-$etcd_version/etcd
if [ ! -x "$TRELLIS_ETCD" ]; then
	echo "setup: building etcd $etcd_version into $TRELLIS_ETCD (once)"
	mkdir -p "$(dirname "$TRELLIS_ETCD")"
	(cd tools/etcd && CGO_ENABLED=0 go build -o "$TRELLIS_ETCD.tmp" . && mv "$TRELLIS_ETCD.tmp" "$TRELLIS_ETCD")
fi
echo "setup: etcd $etcd_version at $TRELLIS_ETCD"
