#!/usr/bin/env bash
# bench-metric.sh FILE BENCHMARK METRIC [TARGET [LABEL]]
# Prints the median over the runs in FILE (go test -bench output, possibly
# -count N) of the custom metric METRIC (b.ReportMetric's unit) of
# BENCHMARK (a full name, sub-benchmark included: BenchmarkX/own); notes
# whether it is <= TARGET (none when empty) and exits 3 when it is not (1
# when missing). LABEL is printed after it ("cross-kind: ...").
set -euo pipefail
file=$1 bench=$2 metric=$3 target=${4:-} label=${5:-}
v=$(awk -v name="$bench" -v unit="$metric" '$1 == name || index($1, name "-") == 1 && $1 ~ "-[0-9]+$" {
	for (i = 2; i <= NF; i++) if ($(i) == unit) print $(i-1) }' "$file" |
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2 }') ||
	{ echo "bench-metric: no $metric of $bench in $file" >&2; exit 1; }
awk -v v="$v" -v bn="$bench" -v m="$metric" -v t="$target" -v l="$label" 'BEGIN {
	printf "%-44s %s = %.3g (median)", bn, m, v
	if (t != "") printf "  (target <= %s: %s)", t, (v <= t ? "met" : "NOT met")
	if (l != "") printf "  [%s]", l
	printf "\n"
	exit (t != "" && v > t) ? 3 : 0
}'
