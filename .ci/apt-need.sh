#!/usr/bin/env bash
# apt-need.sh CHECK=PACKAGE ...: installs with apt-get every PACKAGE whose
# CHECK fails. CHECK is a command on PATH, an absolute path that must
# exist, py:MODULE, a module python3 must import, or syspy:MODULE, one
# /usr/bin/python3 must import (as root, sandboxes use the system's
# python3: a pyenv build under /root is out of a session uid's reach). Without root it says
# what to install instead.
set -euo pipefail
need=()
for arg in "$@"; do
	check=${arg%%=*} pkg=${arg#*=}
	case $check in
	py:*) python3 -c "import ${check#py:}" >/dev/null 2>&1 || need+=("$pkg") ;;
	syspy:*) /usr/bin/python3 -c "import ${check#syspy:}" >/dev/null 2>&1 || need+=("$pkg") ;;
	/*) [ -e "$check" ] || need+=("$pkg") ;;
	*) command -v "$check" >/dev/null || need+=("$pkg") ;;
	esac
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing packages: ${need[*]}; install them as root: apt-get install ${need[*]}" >&2
	exit 1
fi
echo "installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
