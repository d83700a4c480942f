#!/usr/bin/env bash
# step: Debian's own runsc (2022, too old for --platform=systrap), for the test of the too-old-runsc error (seconds)
# The test that sage names an old runsc "too old" with the fix, instead
# of "install runsc", runs against the real one a Debian 12 user gets
# from apt (runsc 0.0~20221219): apt-get download, unpacked into the
# cache (~/.cache/sage/runsc-debian/runsc), never installed. Idempotent;
# where apt has no runsc package, says so and the test names this step.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sage"
dir="$cache/runsc-debian"
if [ -x "$dir/runsc" ]; then
	echo "$("$dir/runsc" --version | head -n 1) in $dir"
	exit 0
fi
if ! command -v apt-get >/dev/null || ! apt-cache show runsc >/dev/null 2>&1; then
	echo "no runsc package in apt here: the too-old-runsc test fails (or skips with SAGE_TEST_ALLOW_SKIP=1)" >&2
	exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/runsc-debian.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq runsc 2>/dev/null)
dpkg-deb -x "$tmp"/runsc_*.deb "$tmp/x"
mkdir -p "$tmp/out"
install -m 0755 "$tmp/x/usr/bin/runsc" "$tmp/out/runsc"
rm -rf "$dir"
mv "$tmp/out" "$dir"
echo "$("$dir/runsc" --version | head -n 1) in $dir"
