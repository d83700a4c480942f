#!/usr/bin/env bash
# step.sh PREFIX LABEL CMD...: prints "PREFIX: LABEL ..." before running
# CMD and its duration when it ends, so a slow step never looks like a
# hang. While CMD runs it shows what it is doing: on a terminal one
# status line, rewritten every second, with the time so far and CMD's
# last line of output; elsewhere (a log, CI) such a line every 30 s.
# CMD's output is kept in a log and printed indented after the line:
# its last two lines on success, all of it on failure. With
# SAGE_STEP_COUNT=WHAT (e.g. "packages compiled", for go build -v) the
# status and the end count CMD's lines as WHAT instead.
set -uo pipefail
prefix=$1 label=$2
shift 2
count=${SAGE_STEP_COUNT:-}
log=$(mktemp)
pid=
trap 'rm -f "$log"' EXIT
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; echo; exit 130' INT
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; echo; exit 143' TERM
start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { d = e - s; printf (d < 10 ? "%.1fs" : "%.0fs"), d }'; }
doing() {
	local what
	if [ -n "$count" ]; then
		what="$(wc -l <"$log" | tr -d ' ') $count"
		[ -s "$log" ] && what="$what, last $(tail -n 1 "$log")"
	else
		what=$(tail -n 1 "$log")
	fi
	printf '%s' "$what" | tr -d '\000-\037' | cut -c1-"${1:-100}"
}
tty=
[ -t 1 ] && tty=1
line="$prefix: $label ... "
printf '%s' "$line"
"$@" >"$log" 2>&1 &
pid=$!
ticks=0 # of 0.2 s: a quick step ends without a wait
while kill -0 "$pid" 2>/dev/null; do
	sleep 0.2
	ticks=$((ticks + 1))
	if [ -n "$tty" ] && [ $((ticks % 5)) -eq 0 ]; then
		cols=$(tput cols 2>/dev/null || echo 100)
		room=$((cols - ${#line} - 12))
		[ $room -lt 10 ] && room=10
		printf '\r\033[K%s%s %s' "$line" "$(elapsed)" "$(doing $room)"
	elif [ -z "$tty" ] && [ $((ticks % 150)) -eq 0 ]; then
		printf '\n%s:     %s: %s' "$prefix" "$(elapsed)" "$(doing 100)"
		line=
	fi
done
wait "$pid"
rc=$?
pid=
secs=$(elapsed)
if [ -n "$tty" ]; then
	printf '\r\033[K%s' "$prefix: $label ... "
elif [ -z "$line" ]; then
	printf '\n%s: %s: ' "$prefix" "$label"
fi
if [ $rc -eq 0 ]; then
	echo "$secs"
	if [ -n "$count" ]; then
		n=$(wc -l <"$log" | tr -d ' ')
		[ "$n" -eq 0 ] && echo "    up to date" || echo "    $n $count"
	else
		tail -n 2 "$log" | sed 's/^/    /'
	fi
else
	echo "FAILED after $secs (exit $rc)"
	sed 's/^/    /' "$log"
fi
exit $rc
