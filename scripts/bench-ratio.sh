#!/usr/bin/env bash
# bench-ratio.sh FILE BASELINE CANDIDATE [TARGET]
# Prints the median ns/op of both benchmarks in FILE (go test -bench output,
# possibly -count N) and their ratio; notes whether TARGET is met and exits
# 3 when it is not (1 when a benchmark is missing).
set -euo pipefail
file=$1 base=$2 cand=$3 target=${4:-}
median() {
	awk -v name="$1" '$1 ~ "^"name"(-[0-9]+)?$" { for (i = 2; i <= NF; i++) if ($(i) == "ns/op") print $(i-1) }' "$file" |
		sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2 }'
}
b=$(median "$base") || { echo "bench-ratio: no $base in $file" >&2; exit 1; }
c=$(median "$cand") || { echo "bench-ratio: no $cand in $file" >&2; exit 1; }
awk -v b="$b" -v c="$c" -v bn="$base" -v cn="$cand" -v t="$target" 'BEGIN {
	r = c / b
	printf "%-34s %12.0f ns/op (median)\n%-34s %12.0f ns/op (median)\nratio %s / %s = %.2fx", bn, b, cn, c, cn, bn, r
	if (t != "") printf "  (target <= %sx: %s)", t, (r <= t ? "met" : "NOT met")
	printf "\n"
	exit (t != "" && r > t) ? 3 : 0
}'
