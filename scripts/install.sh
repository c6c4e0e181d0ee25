#!/usr/bin/env bash
# Install what regtrack needs on Debian/Ubuntu: system tools from apt, regtrack and its
# Python dependencies into ./.venv. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# redis-server/redis-tools: a server to measure and redis-benchmark as load generator.
# util-linux: taskset (CPU pinning). build-essential, git: building Redis versions from source.
# valgrind: callgrind, for --metric instructions.
# ccache: a commit that changes one file rebuilds in seconds (ranges, bisect), not minutes.
PACKAGES=(redis-server redis-tools util-linux build-essential ccache git python3-venv valgrind)
echo "regtrack install: apt packages: ${PACKAGES[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${PACKAGES[@]}" >/dev/null

echo "regtrack install: Python environment in .venv" >&2
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
echo "regtrack install: done ($(.venv/bin/regtrack --version))" >&2
