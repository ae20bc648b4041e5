#!/usr/bin/env bash
# Rebuilds the web page that trellis serve serves at / from web/ into internal/web/dist, which
# is committed and embedded in the binary (so `go build` needs no npm). The npm packages are
# pinned by web/package-lock.json and installed with `npm ci`; esbuild bundles them.
#   scripts/web-build.sh          rebuild
#   scripts/web-build.sh --check  rebuild, and fail if the committed bundle differs
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null; then
	echo "web-build: installing nodejs and npm"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
cd web
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund --loglevel=error
fi
node build.mjs
cd ..
echo "web-build: $(du -sh internal/web/dist | cut -f1) in internal/web/dist"
if [ "${1:-}" = "--check" ]; then
	if ! git diff --quiet -- internal/web/dist || [ -n "$(git ls-files --others --exclude-standard internal/web/dist)" ]; then
		git status --short -- internal/web/dist >&2
		echo "web-build: internal/web/dist differs from what web/ builds: run scripts/web-build.sh and commit it" >&2
		exit 1
	fi
fi
