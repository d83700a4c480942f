#!/usr/bin/env bash
# step: sandbox image sage-sandbox:dev (the first time about as long as the go build of sage, then seconds)
# Builds the sandbox image sage-sandbox:dev (FROM scratch: a static sage
# and busybox) through the Docker API, for the aio provider's Docker
# tests. `sage image build` skips the build when the image's label holds
# the same context hash, so this is quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
if ! docker info >/dev/null 2>&1 && [ ! -S /var/run/docker.sock ]; then
	echo "no Docker Engine: the sandbox image is not built; the Docker tests fail until it is (or skip with SAGE_TEST_ALLOW_SKIP=1)" >&2
	exit 0
fi
bin="${XDG_CACHE_HOME:-$HOME/.cache}/sage/sage-image-bin"
mkdir -p "$(dirname "$bin")"
CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/sage
"$bin" image build --tag sage-sandbox:dev --binary "$bin"
