#!/usr/bin/env bash
# step: sandbox image sage-sandbox:dev, Debian by debootstrap (about 10 min the first time on a busy 2-core machine, network and dpkg bound; seconds after)
# parallel: yes
# Started in the background by .ci/setup.sh while Jaeger and runsc build:
# the debootstrap root file system (minbase + python3, venv, pip, git,
# curl, ...) waits on the network and dpkg, not the CPU. 40-image.sh
# builds the same image and waits for this one (a file lock on the
# root file system's cache).
set -euo pipefail
exec bash "$(dirname "$0")/40-image.sh" full
