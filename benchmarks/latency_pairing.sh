#!/bin/sh
# Does pairing in time on one server CPU hide a latency regression?
#
# 7.0.15 against a candidate whose serverCron busy-waits 2 ms ten times a second
# (tests/slowdown.make_pause_branch; benchmarks/gate_rates.py --kind pause makes the repo),
# open loop at a fixed rate, 4 repetitions, measured with separate trials and then paired in
# time (both servers on the server CPU, one loaded at a time). Prints each trial's p50, p99,
# p99.9 and max (us). Asserts nothing.
#
#   benchmarks/latency_pairing.sh [SLOW_REPO] [RATE]
set -eu
repo=${1:-/tmp/regtrack-slow-repo}
rate=${2:-22000}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pairing in separate time; do
    "$here/.venv/bin/regtrack" run --versions base=7.0.15,cand=pause-2000 --source-repo "$repo" \
        --metric throughput --pipelines 10 --rate "$rate" --repetitions 4 \
        --pairing "$pairing" --db "$tmp/$pairing.db" --no-report >"$tmp/$pairing.log" 2>&1
    echo "== --pairing $pairing, rate $rate/s: repetition|version|valid|p50|p99|p99.9|max (us)"
    sqlite3 "$tmp/$pairing.db" "SELECT t.repetition, g.label, t.valid,
        round(t.lat_p50_ms * 1000), round(t.lat_p99_ms * 1000), round(t.lat_p999_ms * 1000),
        round(t.lat_max_ms * 1000) FROM trials t JOIN targets g ON g.id = t.target_id
        WHERE t.mode = 'latency' ORDER BY t.repetition, g.label"
done
