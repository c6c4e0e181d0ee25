#!/usr/bin/env bash
# The test suite on a fresh Debian machine: regtrack's install with what only the tests use
# (scripts/install.sh --test: chromium for the report pages, pytest and the linters), then
# pytest, which prints the 30 slowest tests.
#
#   scripts/test.sh               the suite CI runs: every real part, once
#   scripts/test.sh --extended    also the second tier, tests that repeat coverage (more
#                                 presets, a second fork); run it before resolving an
#                                 issue that touches what they cover
#
# Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --test
exec .venv/bin/python -m pytest -q --durations=30 "$@"
