#!/usr/bin/env bash
# Installs and starts what the tests and the demo need; each step is
# idempotent and quick when already done. Runs every .ci/setup.d/*.sh in
# order.
set -euo pipefail
cd "$(dirname "$0")/.."
for step in .ci/setup.d/*.sh; do
	[ -e "$step" ] || continue
	bash "$step"
done
