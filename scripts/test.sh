#!/usr/bin/env bash
# The test suite on a fresh Debian machine: regtrack's own install (scripts/install.sh),
# the tools only the tests use (chromium for the report pages, debootstrap for the docker
# builder image), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
TEST_PACKAGES=(chromium fonts-dejavu-core debootstrap)
echo "regtrack tests: apt packages: ${TEST_PACKAGES[*]}" >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${TEST_PACKAGES[@]}" >/dev/null

exec .venv/bin/python -m pytest -q "$@"
