#!/usr/bin/env bash
# Installs what the tests need, then runs the whole test suite: unit tests, and the integration
# tests that create real namespaces, devices and eBPF programs (they need root).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
echo "test: gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || { echo "gofmt would change: $unformatted" >&2; exit 1; }
go vet -tags integration ./...
echo "test: go test"
go test -tags integration -count=1 -timeout 60m ./... 2>&1 | tee /tmp/trellis-test.log
