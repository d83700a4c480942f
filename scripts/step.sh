#!/usr/bin/env bash
# step.sh PREFIX LABEL CMD...: prints "PREFIX: LABEL ..." before running
# CMD and its duration when it ends, so a slow step never looks like a
# hang. CMD's output is kept in a log and printed indented after the line:
# its last two lines on success, all of it on failure.
set -uo pipefail
prefix=$1 label=$2
shift 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
printf '%s: %s ... ' "$prefix" "$label"
"$@" >"$log" 2>&1
rc=$?
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { d = e - s; printf (d < 10 ? "%.1fs" : "%.0fs"), d }')
if [ $rc -eq 0 ]; then
	echo "$secs"
	tail -n 2 "$log" | sed 's/^/    /'
else
	echo "FAILED after $secs (exit $rc)"
	sed 's/^/    /' "$log"
fi
exit $rc
