#!/usr/bin/env bash
# The demo: run a small script in a sandbox with the sage CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
export SAGE_HOME=${SAGE_HOME:-$PWD/.cache/demo-home}
mode=${SAGE_DEMO_MODE:-passthrough}
sage=bin/sage
echo "== sage doctor"
$sage doctor || true
echo
echo "== sage exec --mode $mode: a script that writes, lists and reads back a file"
$sage exec --mode "$mode" --session demo -- 'set -e
echo "hello from $(pwd)" > hello.txt
ls -l hello.txt
cat hello.txt
echo "to stderr" >&2'
echo
echo "== the same workspace through the file API"
$sage fs ls --mode "$mode" --session demo .
echo
echo "== a command that outlives its 1s timeout is killed with its children (exit 124)"
set +e
$sage exec --mode "$mode" --session demo --timeout 1s -- 'sleep 30 & echo started; wait'
echo "exit code: $?"
set -e
echo
echo "== the result as JSON"
$sage exec --mode "$mode" --session demo --json -- 'echo out; echo err >&2; exit 3' || true
