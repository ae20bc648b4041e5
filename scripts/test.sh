#!/usr/bin/env bash
# Installs what the tests need, then runs the whole test suite: unit tests, and the integration
# tests that create real namespaces, devices and eBPF programs (they need root).
#
# scripts/test.sh --kernel 6.1 runs the integration tests inside that kernel instead (Debian's
# package, under QEMU with this machine's userspace: docs/guest-kernel.md); --kernel 6.1
# --cluster runs the cluster on three guests of that kernel (TestGuestCluster) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
kernel= cluster=
if [ "${1:-}" = --kernel ]; then
	[ -n "${2:-}" ] || { echo "usage: scripts/test.sh [--kernel 6.1|RELEASE [--cluster]]" >&2; exit 2; }
	kernel=$2
	[ "${3:-}" = --cluster ] && cluster=1
fi
source scripts/setup.sh
# The CI marker (internal/testkit): a test that skips fails unless test/skips-allowed-in-ci.txt
# lists it with the reason CI cannot run it, since this script installs what the tests need.
export TRELLIS_CI=1
if [ -n "$cluster" ]; then
	echo "test: the cluster on three guests of Linux $kernel alone (about 70 s under software emulation; the suite runs it in 6.1 too)"
	TRELLIS_GUEST_CLUSTER=$kernel exec go test -tags integration -count=1 -timeout 30m -v -run '^TestGuestCluster$' ./test/integration
fi
if [ -n "$kernel" ]; then
	echo "test: the integration tests in Linux $kernel (a guest under QEMU; hours under software emulation)"
	TRELLIS_GUEST_KERNEL=$kernel exec go test -tags integration -count=1 -timeout 7h -v -run '^TestGuestKernel$' ./test/integration
fi
# tshark decodes captured EGRE frames in the multi-machine tests (they skip that check without it).
if ! command -v tshark >/dev/null; then
	echo "test: installing tshark"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null
fi
# Debian's chromium runs the browser tests of the web page (test/integration/web_test.go).
if ! command -v chromium >/dev/null; then
	echo "test: installing chromium"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# A cached guest image: the VM tests that boot their own kernel or initramfs take it from there
# (TestVMOwnKernel runs before any test whose up would build it).
if ! bin/trellis image ls 2>/dev/null | grep -q '^[0-9a-f]\{12\} '; then
	echo "test: building the default guest image"
	bin/trellis image build >/dev/null
fi
export CI_LOG_DIR=${CI_LOG_DIR:-/tmp/trellis-ci-logs}
echo "test: the web page's committed bundle matches web/ (screenshots of its tests go to $CI_LOG_DIR)"
bash scripts/web-build.sh --check
echo "test: the web page's graph model and layout (node --test)"
node --test web/test/
echo "test: gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || { echo "gofmt would change: $unformatted" >&2; exit 1; }
go vet -tags integration ./...
echo "test: fuzzing the topology parser (30s)"
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 30s ./internal/spec
echo "test: fuzzing the topology file through the plan (20s)"
go test -run '^$' -fuzz '^FuzzPlan$' -fuzztime 20s ./internal/plan
echo "test: go test"
# -p 1: one package at a time. The benchmark's smoke test floods the machine, and the rate
# tests measure throughput: run together on two cores, each would spoil the other.
# test/testreport prints what go test prints without -v, then the slowest tests and packages
# (CI's time budget); the events themselves go to $CI_LOG_DIR/go-test.json.
mkdir -p "$CI_LOG_DIR"
go build -o bin/testreport ./test/testreport
go test -tags integration -count=1 -p 1 -timeout 80m -json ./... 2>&1 | tee "$CI_LOG_DIR/go-test.json" |
	bin/testreport | tee /tmp/trellis-test.log
echo "test: Python package (pytest against a real trellis serve)"
# A virtual environment under the cache directory, pytest from PyPI; python3-venv for ensurepip.
if ! python3 -c 'import ensurepip' 2>/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
venv=${XDG_CACHE_HOME:-$HOME/.cache}/trellis/venv
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade ./python pytest mypy
"$venv/bin/mypy" --strict python/src/trellis
(cd python && TRELLIS_BIN="$PWD/../bin/trellis" "$venv/bin/pytest" -q -rs -p no:cacheprovider)
