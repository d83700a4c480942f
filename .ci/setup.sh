#!/usr/bin/env bash
# .ci/setup.sh [demo|test]: installs and starts what the demo or the tests
# need. `demo` runs only the .ci/setup.d/*-demo.sh steps (the packages the
# demo uses); `test` (the default) runs every step in order: those
# packages, the test packages, redis-server, Jaeger (about 11 minutes the
# first time) and the sandbox images (the Debian one built in the
# background meanwhile). Each step is idempotent and quick when
# already done, and prints one line with its duration (the "# step:" line
# of its script).
set -euo pipefail
cd "$(dirname "$0")/.."
set_=${1:-test}
case $set_ in
demo) glob='*-demo.sh' ;;
test) glob='*.sh' ;;
*)
	echo ".ci/setup.sh: unknown set $set_; use demo or test" >&2
	exit 2
	;;
esac
prefix=${SAGE_STEP_PREFIX:-setup}
# Steps marked "# parallel: yes" (long, independent Go builds) start in
# the background; their lines print when they end, before setup.sh exits.
bg=()
for step in .ci/setup.d/$glob; do
	[ -e "$step" ] || continue
	label=$(sed -n 's/^# step: //p' "$step" | head -n 1)
	if grep -q '^# parallel: yes' "$step"; then
		out=$(mktemp)
		bash scripts/step.sh "$prefix" "${label:-$(basename "$step")} (in parallel)" bash "$step" >"$out" 2>&1 &
		bg+=("$!:$out")
		continue
	fi
	bash scripts/step.sh "$prefix" "${label:-$(basename "$step")}" bash "$step"
done
rc=0
[ ${#bg[@]} -eq 0 ] || echo "$prefix: waiting for ${#bg[@]} step(s) running in parallel"
for job in ${bg[@]+"${bg[@]}"}; do
	wait "${job%%:*}" || rc=1
	cat "${job#*:}"
	rm -f "${job#*:}"
done
exit $rc
