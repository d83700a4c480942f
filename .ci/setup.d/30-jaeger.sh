#!/usr/bin/env bash
# step: jaeger v1.76.0 for the trace test (about 11 min the first time on 2 cores, cached after)
# parallel: yes
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
echo "building jaeger $version into $bin (about 11 minutes the first time on 2 cores)"
mkdir -p "$(dirname "$bin")"
(cd tools/jaeger && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
mv "$bin.tmp" "$bin"
