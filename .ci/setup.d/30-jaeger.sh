#!/usr/bin/env bash
# Builds the pinned Jaeger (tools/jaeger) into the cache once, for the
# end-to-end trace test. Quick when the binary is cached.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
version=v1.76.0
bin="${SAGE_JAEGER_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/sage/jaeger-$version}"
if [ -x "$bin" ]; then
	exit 0
fi
echo "setup: building jaeger $version into $bin (takes several minutes the first time)"
mkdir -p "$(dirname "$bin")"
(cd tools/jaeger && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
mv "$bin.tmp" "$bin"
