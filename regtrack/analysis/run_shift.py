"""How far a whole run moves from another run of the same code: what a comparison across
runs must carry in its interval.

Within a run, baseline and candidate share the run's conditions (time of day, the host's
state, the process draw of its servers) and their blocks are paired. Across runs (a
stored baseline, a bisection step against an earlier run) they do not: each run is
shifted as a whole, and pairing its blocks with the other run's hides that shift from the
interval. So the interval adds the variance of the difference of two runs' shifts,
2 sigma^2, where sigma is a run's shift (log scale):

* from history where there is some: runs that measured the same code (a commit, or a
  binary path) with the same comparability key, each run's mean log value over the
  points they share; the spread of those means around their code's mean, pooled over
  codes (the runs' own noise is left in: a conservative estimate);
* else a conservative default per metric (DEFAULT_PCT), said so in the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from regtrack.analysis import history
from regtrack.analysis.metrics import GATING
from regtrack.analysis.sequential import Shift
from regtrack.results.records import AlikeRuns

# A run's shift (sd, percent) assumed before there is history of the same code measured in
# several runs: larger than measured here (docs/methodology.md, "Across runs"), so that
# an answer across runs is never more confident than the data allow.
DEFAULT_PCT = {
    "throughput": 5.0,
    "instructions_per_op": 0.25,
    "cycles_per_op": 0.25,
    "syscalls_per_op": 1.0,
}
LATENCY_DEFAULT_PCT = 10.0
# Degrees of freedom below which history is too thin to replace the default.
MIN_DF = 3


@dataclass(frozen=True)
class RunShift:
    """A run's shift for one metric: sd in percent, its degrees of freedom, and where it
    came from (for the output)."""

    metric: str
    sd_pct: float
    df: float
    source: str

    def of_difference(self) -> Shift:
        """The variance (log scale) of the difference of two runs' shifts."""
        sd = math.log1p(self.sd_pct / 100.0)
        return Shift(2.0 * sd * sd, self.df)

    def as_dict(self) -> dict[str, object]:
        return {"sd_pct": self.sd_pct, "df": self.df, "source": self.source}


def default(metric: str) -> RunShift:
    latency = metric.startswith(("latency", "open_loop", "task_p"))  # closed loop's or open loop's
    pct = DEFAULT_PCT.get(metric, LATENCY_DEFAULT_PCT if latency else 5.0)
    return RunShift(metric, pct, math.inf, "default (no history of one code in several runs)")


def estimate(history: pd.DataFrame, metric: str, comparability: str) -> RunShift:
    """The run shift of ``metric`` among runs with this comparability digest, from
    ``history`` (analysis.history.points rows), or the default where it is too thin."""
    if history.empty:
        return default(metric)
    rows = history[(history["metric"] == metric) & (history["comparability"] == comparability)]
    rows = rows[rows["value"] > 0]
    if rows.empty:
        return default(metric)
    code = rows["commit"].where(rows["commit"] != "", rows["series"])
    rows = rows.assign(code=code, log=rows["value"].map(math.log))
    ss, df, runs = 0.0, 0, 0
    for _, group in rows.groupby(["code", "source_repo", "workload"]):
        per_run = group.pivot_table(index="run_id", columns="point", values="log")
        per_run = per_run.dropna(axis=1)  # the points every run of this code measured
        if per_run.shape[0] < 2 or per_run.shape[1] == 0:
            continue
        means = per_run.mean(axis=1)
        ss += float(((means - means.mean()) ** 2).sum())
        df += per_run.shape[0] - 1
        runs += per_run.shape[0]
    if df < MIN_DF:
        return default(metric)
    sd_pct = 100.0 * math.expm1(math.sqrt(ss / df))
    return RunShift(metric, sd_pct, float(df), f"history: {runs} runs of the same code")


def for_runs(alike: AlikeRuns, metrics: tuple[str, ...]) -> dict[str, RunShift]:
    """Each metric's run shift for comparisons with a run, from ``alike`` (results.loaded:
    the runs measured like it that share code with another such run). History is read
    for the gating metrics only (the others take their default): a bisection compares
    across runs at every step, and each run read costs its cells."""
    wanted = tuple(m for m in metrics if m in GATING)
    frame = history.as_frame(p for run in alike.runs for p in history.run_points(run, wanted))
    return {
        name: estimate(frame, name, alike.comparability) if name in wanted else default(name)
        for name in metrics
    }
