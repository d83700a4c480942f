#!/usr/bin/env bash
# step: runsc (gVisor) for isolation gvisor and the Docker runtime runsc (about 3-15 min the first time, cached after)
# parallel: yes
# Builds a pinned runsc with Go into the cache once, installs it as
# /usr/local/bin/runsc and registers it with the Docker Engine as the
# runtime "runsc" (daemon.json, then SIGHUP: dockerd reloads its runtimes
# without a restart; the default runtime stays). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
version=v0.0.0-20260905035102-160fafc42237 # gvisor.dev/gvisor, a commit of its Go branch
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sage"
bin="${SAGE_RUNSC_BIN:-$cache/runsc-$version}"
if [ ! -x "$bin" ]; then
	echo "building runsc $version into $bin"
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/runsc-build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	CGO_ENABLED=0 GOBIN="$tmp" go install "gvisor.dev/gvisor/runsc@$version"
	mv "$tmp/runsc" "$bin"
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "not root: runsc is in $bin; as root, install it as /usr/local/bin/runsc (isolation gvisor runs it as root)" >&2
	exit 0
fi
if ! cmp -s "$bin" /usr/local/bin/runsc; then
	install -m 0755 "$bin" /usr/local/bin/runsc.tmp
	mv /usr/local/bin/runsc.tmp /usr/local/bin/runsc
fi
if ! command -v dockerd >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
	echo "runsc installed; no running Docker Engine to register it with"
	exit 0
fi
if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
	echo "runsc installed and registered with Docker"
	exit 0
fi
conf=/etc/docker/daemon.json
mkdir -p /etc/docker
python3 - "$conf" <<'PY'
import json, os, sys
path = sys.argv[1]
conf = {}
if os.path.exists(path) and os.path.getsize(path) > 0:
    with open(path) as f:
        conf = json.load(f)
conf.setdefault("runtimes", {})["runsc"] = {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--platform=systrap"]}
tmp = path + ".sage-tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
os.replace(tmp, path)
PY
pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd)
kill -HUP "$pid"
for _ in $(seq 50); do
	if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
		echo "runsc installed and registered with Docker ($conf)"
		exit 0
	fi
	sleep 0.2
done
echo "runsc is in $conf but dockerd did not load it; restart dockerd" >&2
exit 1
