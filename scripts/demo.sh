#!/usr/bin/env bash
# The demo: `sage agent --model scripted` in local (bubblewrap) mode. The
# model is a built-in REPLAY of a fixed plan (write a Python file, run it,
# read the output, answer), so it needs no model and no network. The trace
# tree goes to stderr; with OTEL_EXPORTER_OTLP_ENDPOINT set (for example
# http://127.0.0.1:4317 with `make jaeger` running) the trace also goes to
# Jaeger (service "sage", or $OTEL_SERVICE_NAME).
#
# It leaves nothing running: the session daemon its `sage fs` and `sage
# exec --session` start is stopped at the end, however the demo ends, and
# the one of an earlier run before its workspace is made afresh.
# SAGE_BIN names the sage to run (default bin/sage); SAGE_DEMO_START, the
# time `make demo` began (date +%s), for the closing line.
set -euo pipefail
cd "$(dirname "$0")/.."
# As root, sage's own default (/var/lib/sage): each session's commands run
# as the session's uid, which must reach the workspace, and a checkout under
# /root is closed to it.
if [ "$(id -u)" != 0 ]; then
	export SAGE_HOME=${SAGE_HOME:-$PWD/.cache/demo-home}
fi
mode=${SAGE_DEMO_MODE:-local}
session=demo
sage=${SAGE_BIN:-bin/sage}
stop_session() { "$sage" session stop "$session" >/dev/null 2>&1 || true; }
trap stop_session EXIT
stop_session # an earlier run's, before its folder goes
rm -rf "${SAGE_HOME:-/var/lib/sage}/sessions/$session" # a fresh workspace every run

echo "== sage agent --model scripted --mode $mode (a labelled replay, not a language model)"
if ! "$sage" agent --model scripted --mode "$mode" --session "$session"; then
	echo
	echo "the agent failed; sage doctor says:"
	"$sage" doctor || true
	exit 1
fi
echo
echo "== the files it left in the workspace"
"$sage" fs ls --mode "$mode" --session "$session" .
echo
echo "== fib_output.txt, read back through the sandbox"
"$sage" exec --mode "$mode" --session "$session" -- cat fib_output.txt
if [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]; then
	echo
	echo "== trace exported to $OTEL_EXPORTER_OTLP_ENDPOINT; open Jaeger (http://127.0.0.1:16686) and search service ${OTEL_SERVICE_NAME:-sage}"
fi
stop_session
echo
if [ -n "${SAGE_DEMO_START:-}" ]; then
	echo "demo: done in $(($(date +%s) - SAGE_DEMO_START))s in all (the set-up and the build included; the run itself took ${SECONDS}s); its session is stopped, nothing is left running"
else
	echo "demo: the run took ${SECONDS}s; its session is stopped, nothing is left running"
fi
