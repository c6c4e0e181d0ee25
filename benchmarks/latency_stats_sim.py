#!/usr/bin/env python3
"""Which interval is valid for latency percentiles of open-loop trials? Simulated, no Redis.

Each trial is an open loop: Poisson arrivals at ``load`` x capacity for ``--duration``
seconds into one FIFO server (M/G/1: mean service 25 us, lognormal spread 0.3, plus a
15 us client/kernel base), timed from the intended send. The host's speed wanders: every
trial's service and base times are scaled by a factor whose log is AR(1) over the trials in
the order they run (A B, B A, ...: stationary sd ``host sd``, lag-1 correlation 0.6), as
throughput wanders 10-30% on this VM (/work/shared/research/throughput-in-time.md). Trials
of one block read the same arrival stream (seed-matched). "paired in time" gives both sides
of a block the same factor (each with its own 2% fast noise): the engine alternates its
arrival stream between the two live servers. A stall (a timer event that busy-waits) is a
job of its length queued every 100 ms at a random phase; a host hiccup (VM steal) is such
a job at Poisson times (0.5/s, exponential length, mean 1 ms).

Methods, all on per-trial percentiles except the pooled bootstrap:
  t          Student t over blocks' log ratios (sequential.py, fixed n)
  t-spend    t-spending (sequential.py, a look every 2 blocks): the gate's interval
  HL         Wilcoxon signed-rank / Hodges-Lehmann interval over blocks' log ratios (exact)
  boot-blk   percentile bootstrap of blocks' log ratios (2,000 resamples)
  pooled     all requests of each version pooled, requests bootstrapped (exact bootstrap
             law of the quantile from order statistics; independent sides)

Prints coverage of 95% intervals under A/A (share whose interval holds 0; t-spend:
"ever": share that never missed at any look up to n), median half-widths, and the share of
gates that call a regression (t-spend at the look of n blocks, at regtrack's default
thresholds; the max, never judged, at 20%) under stalls and a slower server. Asserts
nothing. Its output (about 25 minutes on 2 cores) is benchmarks/results/latency_stats_sim.txt:

    nice -n 19 .venv/bin/python benchmarks/latency_stats_sim.py --experiments 400
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import bdtr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.analysis import sequential, stats  # noqa: E402
from regtrack.analysis.interval import Change  # noqa: E402
from regtrack.core.settings import Thresholds  # noqa: E402

QUANTILES = {"p50": 0.5, "p99": 0.99, "p99.9": 0.999, "max": 1.0}
# regtrack's provisional defaults; the max is never judged by regtrack (shown here at 20%).
_T = Thresholds()
THRESHOLDS = {"p50": _T.open_loop_p50, "p99": _T.open_loop_p99, "p99.9": _T.open_loop_p999}
THRESHOLDS["max"] = 20.0
SHOWN_N = (4, 6, 8, 12, 16, 20)
ALPHA = 0.05
SERVICE_US, SERVICE_SPREAD, BASE_US = 25.0, 0.3, 15.0
AR_PHI = 0.6


@dataclass(frozen=True)
class Scenario:
    """One simulated design: the noise, and what the candidate does differently."""

    name: str
    load: float = 0.5
    host_sd: float = 0.10
    paired: bool = False
    hiccups: bool = False
    stall_us: float = 0.0  # candidate's stall every 100 ms
    slower: float = 1.0  # candidate's service time factor


def arrivals(rng: np.random.Generator, rate_per_us: float, duration_us: float) -> np.ndarray:
    """Intended send times of one Poisson stream (us)."""
    n = int(rate_per_us * duration_us * 1.1) + 100
    times = np.cumsum(rng.exponential(1 / rate_per_us, n))
    return times[times < duration_us]


def sojourns(times: np.ndarray, service: np.ndarray, jobs_t: np.ndarray, jobs_d: np.ndarray):
    """FIFO waiting + service of each request, with extra jobs (stalls, hiccups) queued at
    ``jobs_t`` for ``jobs_d``: Lindley's recursion W = C - running min(C), C = cumsum."""
    n = len(times)
    if len(jobs_t):
        t = np.concatenate([times, jobs_t])
        s = np.concatenate([service, jobs_d])
        order = np.argsort(t, kind="stable")
        t, s = t[order], s[order]
    else:
        t, s, order = times, service, None
    c = np.concatenate([[0.0], np.cumsum(s[:-1] - np.diff(t))])
    total = c - np.minimum.accumulate(np.minimum(c, 0.0)) + s
    if order is None:
        return total
    out = np.empty(n)
    real = order < n
    out[order[real]] = total[real]
    return out


def trial(
    rng: np.random.Generator,
    times: np.ndarray,
    factor: float,
    duration_us: float,
    stall_us: float,
    hiccups: tuple[np.ndarray, np.ndarray],
    slower: float = 1.0,
) -> np.ndarray:
    """Latencies (us) of one trial's requests."""
    spread = rng.lognormal(-(SERVICE_SPREAD**2) / 2, SERVICE_SPREAD, len(times))
    service = SERVICE_US * factor * slower * spread
    jobs_t, jobs_d = hiccups
    if stall_us > 0:
        stalls = np.arange(rng.uniform(0, 100_000), duration_us, 100_000.0)
        jobs_t = np.concatenate([jobs_t, stalls])
        jobs_d = np.concatenate([jobs_d, np.full(len(stalls), stall_us)])
    return sojourns(times, service, jobs_t, jobs_d) + BASE_US * factor


def hiccup_jobs(rng: np.random.Generator, on: bool, duration_us: float):
    if not on:
        return np.empty(0), np.empty(0)
    k = rng.poisson(0.5 * duration_us / 1e6)
    return rng.uniform(0, duration_us, k), rng.exponential(1000.0, k)


def percentiles(lat: np.ndarray) -> np.ndarray:
    """p50, p99, p99.9, max as HDR reports them: the smallest value with q of the count."""
    ks = [max(0, math.ceil(q * len(lat)) - 1) for q in QUANTILES.values()]
    part = np.partition(lat, ks)
    return part[ks]


def experiment(rng: np.random.Generator, sc: Scenario, blocks: int, duration_s: float):
    """One interleaved A/B stream of ``blocks`` blocks: per-trial percentiles (blocks, 2, 4)
    and the requests (blocks, 2) kept for pooling."""
    duration_us = duration_s * 1e6
    rate = sc.load / SERVICE_US
    innov = sc.host_sd * math.sqrt(1 - AR_PHI**2)
    logf = rng.normal(0, sc.host_sd)
    pct = np.empty((blocks, 2, len(QUANTILES)))
    raw: list[list[np.ndarray]] = []
    for b in range(blocks):
        times = arrivals(rng, rate, duration_us)
        shared = hiccup_jobs(rng, sc.hiccups and sc.paired, duration_us)
        if sc.paired:  # one time window for both sides
            logf = AR_PHI * logf + rng.normal(0, innov)
        sides: list[np.ndarray] = [np.empty(0), np.empty(0)]
        for side in (0, 1) if b % 2 == 0 else (1, 0):
            if not sc.paired:  # each trial in its own time window
                logf = AR_PHI * logf + rng.normal(0, innov)
            factor = math.exp(logf + (rng.normal(0, 0.02) if sc.paired else 0.0))
            jobs = shared if sc.paired else hiccup_jobs(rng, sc.hiccups, duration_us)
            cand = side == 1
            sides[side] = trial(
                rng, times, factor, duration_us, sc.stall_us if cand else 0.0, jobs,
                sc.slower if cand else 1.0,
            )  # fmt: skip
            pct[b, side] = percentiles(sides[side])
        raw.append(sides)
    return pct, raw


@functools.lru_cache(maxsize=256)
def signed_rank_critical(n: int, level: float) -> int:
    """Largest c with P(T+ <= c) <= level / 2 under the null (exact), -1 if none."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    cdf = np.cumsum(counts) / 2.0**n
    ok = np.nonzero(cdf <= level / 2)[0]
    return int(ok[-1]) if len(ok) else -1


def hodges_lehmann(x: np.ndarray, level: float) -> tuple[float, float]:
    """The signed-rank interval of the centre of symmetry: Walsh averages' order stats."""
    c = signed_rank_critical(len(x), level)
    if c < 0:
        return -math.inf, math.inf
    i, j = np.triu_indices(len(x))
    walsh = np.sort((x[i] + x[j]) / 2)
    return float(walsh[c]), float(walsh[len(walsh) - 1 - c])


def block_bootstrap(rng: np.random.Generator, x: np.ndarray, level: float) -> tuple[float, float]:
    means = rng.choice(x, (2000, len(x))).mean(axis=1)
    lo, hi = np.quantile(means, [level / 2, 1 - level / 2])
    return float(lo), float(hi)


def quantile_bootstraps(rng: np.random.Generator, x: np.ndarray, draws: int) -> np.ndarray:
    """``draws`` values of each quantile of request resamples of ``x`` (quantiles, draws),
    drawn from their exact law: P(Q* <= x_(j)) = P(Binomial(N, j/N) >= ceil(qN))."""
    n = len(x)
    spans = []
    for q in QUANTILES.values():
        m = max(1, math.ceil(q * n))
        spread = 8 * math.sqrt(n * q * (1 - q)) + 30
        spans.append((m, max(1, int(m - spread)), min(n, int(m + spread))))
    part = np.partition(x, sorted({k - 1 for _, lo, hi in spans for k in (lo, hi)}))
    out = np.empty((len(spans), draws))
    for i, (m, lo, hi) in enumerate(spans):
        window = np.sort(part[lo - 1 : hi])
        cdf = 1.0 - bdtr(m - 1, n, np.arange(lo, hi + 1) / n)
        cdf[-1] = 1.0
        picks = np.searchsorted(cdf, rng.uniform(0, 1, draws))
        out[i] = window[np.minimum(picks, len(window) - 1)]
    return out


def pooled_intervals(rng: np.random.Generator, raw, n: int) -> list[tuple[float, float]]:
    """Per quantile, the percentile interval of the log ratio of the pooled quantiles."""
    logs = [
        np.log(quantile_bootstraps(rng, np.concatenate([raw[b][side] for b in range(n)]), 2000))
        for side in (0, 1)
    ]
    lo, hi = np.quantile(logs[1] - logs[0], [ALPHA / 2, 1 - ALPHA / 2], axis=1)
    return list(zip(lo.tolist(), hi.tolist(), strict=True))


Interval = tuple[float, float, float]  # estimate, low, high: log ratio
ALL_METHODS = ("t", "t-spend", "HL", "boot-blk", "pooled")


def _log(pct: float) -> float:
    return math.log1p(pct / 100) if pct > -100 else -math.inf


def intervals(
    rng: np.random.Generator, pct: np.ndarray, pooled: list | None, n: int, qi: int
) -> dict[str, Interval]:
    """Every method's interval for quantile ``qi`` from the first ``n`` blocks (the rank,
    bootstrap and pooled ones only at the shown n)."""
    x = np.log(pct[:n, 1, qi]) - np.log(pct[:n, 0, qi])
    est = float(x.mean())
    out: dict[str, Interval] = {}
    for method, name in (("t", "t"), ("t-spending", "t-spend")):
        look = sequential.Look(math.ceil(n / 2))
        ch = sequential.interval(list(x), ALPHA, method=method, look=look)
        out[name] = (est, _log(ch.low_pct), _log(ch.high_pct))
    if n in SHOWN_N:
        out["HL"] = (float(np.median(x)), *hodges_lehmann(x, ALPHA))
        out["boot-blk"] = (est, *block_bootstrap(rng, x, ALPHA))
        if pooled is not None:
            out["pooled"] = (est, *pooled[qi])
    return out


def verdict(iv: Interval, threshold: float) -> str:
    est, lo, hi = (100 * math.expm1(min(v, 50)) if v > -math.inf else -100.0 for v in iv)
    return stats.verdict(Change(est, lo, hi), threshold, higher_is_better=False)


@dataclass
class Tally:
    """Counts over experiments, keyed (method, quantile, n)."""

    runs: int = 0
    covered: dict = field(default_factory=dict)
    never_missed: dict = field(default_factory=dict)  # t-spend, every look up to n
    halves: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)

    def add(self, key: tuple, iv: Interval, threshold: float) -> None:
        _, lo, hi = iv
        self.covered[key] = self.covered.get(key, 0) + (lo <= 0 <= hi)
        self.halves.setdefault(key, []).append((hi - lo) / 2)
        v = verdict(iv, threshold)
        self.verdicts.setdefault(key, {}).setdefault(v, 0)
        self.verdicts[key][v] += 1


def run(sc: Scenario, experiments: int, blocks: int, duration: float, seed: int) -> Tally:
    tally = Tally()
    looks = range(2, blocks + 1, 2)
    for e in range(experiments):
        rng = np.random.default_rng([seed, e, zlib.crc32(sc.name.encode())])
        pct, raw = experiment(rng, sc, blocks, duration)
        tally.runs += 1
        aa = sc.stall_us == 0 and sc.slower == 1.0
        pooled = {n: pooled_intervals(rng, raw, n) for n in SHOWN_N if n <= blocks and aa}
        for qi, q in enumerate(QUANTILES):
            ever = True
            for n in looks:
                ivs = intervals(rng, pct, pooled.get(n), n, qi)
                ever &= ivs["t-spend"][1] <= 0 <= ivs["t-spend"][2]
                tally.never_missed[(q, n)] = tally.never_missed.get((q, n), 0) + ever
                if n in SHOWN_N:
                    for method, iv in ivs.items():
                        tally.add((method, q, n), iv, THRESHOLDS[q])
    return tally


def _cells(values) -> str:
    return "".join(f"{v:>8}" for v in values)


def print_coverage(sc: Scenario, t: Tally) -> None:
    print(f"\n{sc.name}: A/A coverage of 95% intervals (%), {t.runs} streams")
    print(f"{'':<16}" + _cells(f"n={n}" for n in SHOWN_N) + "   median half-width n=8, 20")
    for q in QUANTILES:
        for m in ALL_METHODS:
            if (m, q, SHOWN_N[0]) not in t.covered:
                continue
            cov = [100 * t.covered.get((m, q, n), math.nan) / t.runs for n in SHOWN_N]
            half = [
                100 * math.expm1(float(np.median(t.halves.get((m, q, n), math.nan))))
                for n in (8, 20)
            ]
            print(f"{q + ' ' + m:<16}" + _cells(f"{c:.1f}" for c in cov), end="")
            print(f"   {half[0]:7.1f} {half[1]:7.1f}")
        ever = [100 * t.never_missed.get((q, n), math.nan) / t.runs for n in SHOWN_N]
        print(f"{q + ' t-spend ever':<16}" + _cells(f"{c:.1f}" for c in ever))


def print_verdicts(sc: Scenario, t: Tally, wanted: str) -> None:
    print(f"\n{sc.name}: gates saying {wanted!r} (t-spend at the look of n blocks, %)")
    print(f"{'':<16}" + _cells(f"n={n}" for n in SHOWN_N) + "  threshold")
    for q in QUANTILES:
        shares = [
            100 * t.verdicts.get(("t-spend", q, n), {}).get(wanted, 0) / t.runs for n in SHOWN_N
        ]
        print(f"{q:<16}" + _cells(f"{s:.1f}" for s in shares) + f"  {THRESHOLDS[q]:g}%")


SCENARIOS = (
    Scenario("A/A, separate trials, host sd 10%"),
    Scenario("A/A, paired in time, host sd 10%", paired=True),
    Scenario("A/A, separate trials, host sd 20%, hiccups", host_sd=0.20, hiccups=True),
    Scenario("A/A, separate trials, load 0.8, host sd 10%", load=0.8),
    Scenario(
        "A/A, paired in time, load 0.8, host sd 20%, hiccups",
        load=0.8,
        host_sd=0.20,
        paired=True,
        hiccups=True,
    ),
    Scenario("stall 2 ms / 100 ms, separate trials", stall_us=2000.0),
    Scenario("stall 0.5 ms / 100 ms, separate trials", stall_us=500.0),
    Scenario("service 20% slower, separate trials", slower=1.2),
    Scenario("stall 2 ms / 100 ms, paired in time", paired=True, stall_us=2000.0),
    Scenario("stall 0.5 ms / 100 ms, paired in time", paired=True, stall_us=500.0),
    Scenario("service 20% slower, paired in time", paired=True, slower=1.2),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=400)
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per trial")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help="scenarios whose name contains this")
    args = parser.parse_args()
    print(
        f"{args.experiments} simulated streams of {args.blocks} blocks per scenario, "
        f"{args.duration:g} s trials at load 0.5 (20k req/s) unless said, seed {args.seed}"
    )
    for sc in SCENARIOS:
        if args.only and args.only not in sc.name:
            continue
        t = run(sc, args.experiments, args.blocks, args.duration, args.seed)
        if sc.name.startswith("A/A"):
            print_coverage(sc, t)
            print_verdicts(sc, t, "no change")
            print_verdicts(sc, t, "regression")
        else:
            print_verdicts(sc, t, "regression")


if __name__ == "__main__":
    main()
