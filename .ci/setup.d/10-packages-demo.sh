#!/usr/bin/env bash
# step: packages for the demo (bubblewrap, python3)
# The demo runs `sage agent --model scripted` in local mode: bubblewrap is
# the sandbox and the scripted plan runs `python3 fib.py` inside it (as
# root, the system's /usr/bin/python3: see apt-need.sh).
set -euo pipefail
exec bash "$(dirname "$0")/../apt-need.sh" bwrap=bubblewrap python3=python3 /usr/bin/python3=python3
