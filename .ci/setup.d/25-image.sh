#!/usr/bin/env bash
# step: sandbox images sage-sandbox:dev (Debian by debootstrap: about 10 min the first time on a busy 2-core machine, network and dpkg bound; seconds after) and sage-sandbox:minimal (busybox, seconds)
# parallel: yes
# Builds the sandbox images through the Docker API, no registry needed:
# sage-sandbox:dev, Debian with python3 (venv, pip), git, curl, coreutils
# and bash plus a static sage (debootstrap from the apt mirror when no
# registry is reachable, cached in ~/.cache/sage/image), and
# sage-sandbox:minimal (FROM scratch: static sage, busybox, the host's
# python3). `sage image build` skips a build whose content hash matches
# the image's label, so this is quick when nothing changed. It runs in
# parallel with the Go builds of the other long steps: debootstrap waits
# on the network and dpkg, not the CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
if ! docker info >/dev/null 2>&1 && [ ! -S /var/run/docker.sock ]; then
	echo "no Docker Engine: the sandbox image is not built; the Docker tests fail until it is (or skip with SAGE_TEST_ALLOW_SKIP=1)" >&2
	exit 0
fi
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sage"
mkdir -p "$cache"
bin="$cache/sage-image-bin"
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -o "$bin" ./cmd/sage
"$bin" image build --binary "$bin"
"$bin" image build --minimal --binary "$bin"
