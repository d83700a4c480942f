#!/usr/bin/env bash
# step: packages for the tests (busybox-static redis-server util-linux curl python3-venv procps nodejs passwd git gcc pip debootstrap)
# busybox-static: the sandbox image; redis-server: the redis state store;
# util-linux: setsid, prlimit; curl: the network allowlist tests drive the
# egress proxies with it; python3-venv: ExecutePython's per-session venv;
# procps: ps in the escape suite; nodejs: ExecuteJavaScript; passwd:
# useradd for the unprivileged run of the escape suite; git, gcc,
# libc6-dev, pip and setuptools: the seccomp tests run them under the
# filter. debootstrap: the Debian root file system of the sandbox image.
set -euo pipefail
exec bash "$(dirname "$0")/../apt-need.sh" /bin/busybox=busybox-static redis-server=redis-server setsid=util-linux \
	curl=curl py:ensurepip=python3-venv /usr/bin/python3=python3 syspy:ensurepip=python3-venv syspy:pip=python3-pip \
	syspy:setuptools=python3-setuptools ps=procps node=nodejs useradd=passwd git=git gcc=gcc /usr/include/stdio.h=libc6-dev debootstrap=debootstrap
