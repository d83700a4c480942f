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
# A step marked "# background: yes" starts in the background (its lines
# are printed when it ends, after the other steps); setup waits for it.
bg_pids=() bg_logs=()
trap 'rm -f "${bg_logs[@]}"' EXIT
for step in .ci/setup.d/$glob; do
	[ -e "$step" ] || continue
	label=$(sed -n 's/^# step: //p' "$step" | head -n 1)
	if grep -q '^# background: yes' "$step"; then
		bg_logs+=("$(mktemp)")
		echo "$prefix: started in the background: ${label:-$(basename "$step")}"
		bash scripts/step.sh "$prefix" "${label:-$(basename "$step")}" bash "$step" >"${bg_logs[-1]}" 2>&1 &
		bg_pids+=($!)
		continue
	fi
	bash scripts/step.sh "$prefix" "${label:-$(basename "$step")}" bash "$step"
done
rc=0
for i in "${!bg_pids[@]}"; do
	wait "${bg_pids[$i]}" || rc=1
	cat "${bg_logs[$i]}"
done
exit $rc
