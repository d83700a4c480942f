#!/usr/bin/env bash
# Debian packages: bubblewrap (local mode), busybox-static (the sandbox
# image), redis-server (the redis state store), util-linux (setsid, prlimit),
# curl (the network allowlist tests drive the egress proxies with it);
# git, gcc, nodejs, pip and setuptools (the seccomp tests run them under
# the filter).
set -euo pipefail
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v redis-server >/dev/null || need+=(redis-server)
command -v setsid >/dev/null || need+=(util-linux)
command -v python3 >/dev/null || need+=(python3)
command -v curl >/dev/null || need+=(curl)
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip python3-setuptools)
command -v git >/dev/null || need+=(git)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v node >/dev/null || need+=(nodejs)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "setup: missing packages: ${need[*]}; install them as root: apt-get install ${need[*]}" >&2
	exit 1
fi
echo "setup: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
