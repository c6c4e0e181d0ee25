#!/usr/bin/env bash
# Install regtrack and run a short real comparison on this machine, then print the
# % change table and where the results went. Takes a minute or two.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
# The Debian redis-server measured twice under two labels: an A/A comparison that shows
# how much the numbers move on this machine when nothing changed.
.venv/bin/regtrack run \
    --versions "a=bin:/usr/bin/redis-server,b=bin:/usr/bin/redis-server" \
    --pipelines 1,10,30 --duration 2 --warmup 1 --repetitions 2
