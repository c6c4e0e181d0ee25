"""One pooled change per metric, valid however often the CI gate looks.

The gate adds blocks (one repetition of baseline and candidate, at every point) two at a
time and looks after each pair, stopping once the answer is decided. A fixed-n t interval
checked at every look misses the true change far more often than its nominal 5% (in 25%
of streams over 15 looks, see below), so each look's interval must pay for the looks before it.

Pooling: points of one block share the server processes, seed and time window, so they are
strongly correlated and carry little independent information; blocks are independent. The
unit of inference is therefore the block: ``block_values`` averages a block's log ratios
over the points, and the intervals treat those averages as i.i.d., roughly normal values.

Two valid constructions are implemented (``method``):

* ``"t-spending"`` (default): Bonferroni spending of alpha over the looks. Look k (at
  n = look_every * k blocks) reports the exact Student t interval with n - 1 degrees of
  freedom at level alpha_k; by the union bound the chance that any look misses is at most
  sum alpha_k = alpha, whatever the dependence between looks and however the gate stops.
  alpha_k = alpha / (j (j + 1)) with j = k - k0 + 1, where k0 is the first look with at least
  3 blocks; earlier looks spend nothing and are unbounded (a t quantile with 1 degree of
  freedom at level alpha/2 is 25, so alpha spent there is wasted). The union-bound
  argument for a sequence of looks goes back to Robbins (1970), "Statistical methods
  related to the law of the iterated logarithm", Ann. Math. Statist. 41(5):1397-1409;
  spending alpha over looks is Lan & DeMets (1983), "Discrete sequential boundaries for
  clinical trials", Biometrika 70(3):659-663 (here with Bonferroni instead of their exact
  joint-normal boundaries, so no maximum number of looks is needed).
* ``"lai-t-mixture"``: the t confidence sequence of Wang & Ramdas (2023), "Anytime-valid
  t-tests and confidence sequences for Gaussian means with unknown variance" (arXiv
  2310.03722), which replaces the flat mixture of Lai (1976), "On confidence sequences",
  Ann. Statist. 4(2):265-280, by a N(0, 1/c) mixture over the standardised effect
  (mean - m) / sigma, with Lai's right-Haar mixture over sigma. With V = sum (x_i - m)^2 and
  S = sum (x_i - m), M_n(m) = sqrt(c / (n + c)) * (V / (V - S^2 / (n + c)))^(n / 2) is a
  test martingale under mean = m (in the filtration of the scale-invariant data), so by
  Ville's inequality {m : M_n(m) < 1/alpha} covers the mean at all n at once. Solving:
  with SS = sum (x_i - mean)^2 and q = 1 - (alpha^2 c / (n + c))^(1/n), the set is
  unbounded if n - q (n + c) <= 0, else |mean - m| < sqrt(q (n + c) SS / (n (n - q (n + c)))).
  Valid at every n, not only at looks, at the price of being wider at n <= 8.

Both are t-type: the half-width is a constant for each n (and look) times the sample sd.
Why "t-spending", with 1/(j (j + 1)): docs/methodology.md ("Looks") has the comparison of
the constructions that ``benchmarks/sequential_methods.py`` prints.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from scipy.special import ndtri, stdtrit

from regtrack.analysis.interval import Change

METHODS = ("t-spending", "lai-t-mixture")
# The plain Student t interval: valid for one look at a planned number of blocks (a
# `regtrack run` without --until-decided), not for a gate that looks after every block.
FIXED = "t"
DEFAULT_METHOD = "t-spending"
# Prior precision of the standardised effect in the t-mixture: c = 0.25 is bounded from
# n = 4 on and within 6% of the narrowest c at every n from 6 to 16 blocks
# (benchmarks/sequential_methods.py).
LAI_C = 0.25
# Spending starts at the first look with this many blocks (2 degrees of freedom).
FIRST_SPENDING_BLOCKS = 3
Z_POWER = float(ndtri(0.80))


class Look(NamedTuple):
    """Look ``k`` of a gate that adds ``every`` blocks between looks: a gate on one host
    looks after every pair of blocks; a gate merged from shards once per merge round."""

    k: int
    every: int = 2


def _pct(log_ratio: float) -> float:
    if log_ratio > 700:  # beyond a float: an interval this wide is unbounded
        return math.inf
    return 100.0 * math.expm1(log_ratio)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def block_values(d: Mapping[int, Mapping[str, float]], points: Sequence[str]) -> list[float]:
    """One pooled log ratio per block (ascending block number): the mean over ``points``.

    Points within a block are correlated, so the block, not the trial, is the independent
    unit. A block missing some points keeps its information via the additive two-way
    model (block + point): each available cell is shifted by (point mean - grand mean)
    before averaging, so a block that lacks a point with a high ratio is not pulled down.
    Blocks with no usable point are dropped; non-finite cells count as missing; points
    present in no block are ignored.
    """
    wanted = list(dict.fromkeys(points))
    cells: dict[int, dict[str, float]] = {}
    for block, row in d.items():
        cells[block] = {
            p: float(row[p])
            for p in wanted
            if p in row and row[p] is not None and math.isfinite(row[p])
        }
    present = [p for p in wanted if any(p in c for c in cells.values())]
    if not present:
        return []
    point_mean = {p: _mean([c[p] for c in cells.values() if p in c]) for p in present}
    grand = _mean(list(point_mean.values()))
    out = []
    for block in sorted(cells):
        c = cells[block]
        if not c:
            continue
        if len(c) == len(present):
            out.append(_mean(list(c.values())))  # complete: the plain mean, exactly
        else:
            out.append(_mean([v - (point_mean[p] - grand) for p, v in c.items()]))
    return out


def look_alpha(k: int, alpha: float, look_every: int = 2) -> float:
    """alpha spent at look k (1-based): alpha / (j (j + 1)), j counted from the first look
    with FIRST_SPENDING_BLOCKS blocks; earlier looks get 0. Sums to alpha over all looks."""
    first = math.ceil(FIRST_SPENDING_BLOCKS / look_every)
    j = k - first + 1
    return alpha / (j * (j + 1)) if j >= 1 else 0.0


@functools.lru_cache(maxsize=4096)
def t_radius(n: int, level_alpha: float, df: int | None = None) -> float:
    """Half-width, in sample sds, of the two-sided Student t interval at ``level_alpha``
    (``df``: degrees of freedom of the sd, n - 1 unless some were spent on host levels)."""
    df = n - 1 if df is None else df
    if n < 2 or df < 1 or level_alpha <= 0:
        return math.inf
    return float(stdtrit(df, 1 - level_alpha / 2)) / math.sqrt(n)


@functools.lru_cache(maxsize=4096)
def lai_radius(n: int, alpha: float, c: float = LAI_C) -> float:
    """Half-width, in sample sds, of the t-mixture confidence sequence at n values."""
    if n < 2:
        return math.inf
    # q = 1 - (alpha^2 c / (n + c))^(1/n), via expm1 to keep precision when q is small.
    q = -math.expm1((2 * math.log(alpha) + math.log(c) - math.log(n + c)) / n)
    room = n - q * (n + c)
    if room <= 0:
        return math.inf
    # SS = (n - 1) sd^2.
    return math.sqrt(q * (n + c) * (n - 1) / (n * room))


def radius(
    n: int,
    alpha: float,
    look_every: int = 2,
    method: str = DEFAULT_METHOD,
    look: int | None = None,
    df: int | None = None,
) -> float:
    """Half-width in sample sds of look k = ``look``, by default ceil(n / look_every)
    (inf: unbounded). A gate whose blocks can be invalid passes the look it is at (its
    repetitions / look_every), so two looks never spend the same level."""
    if method == "t-spending":
        k = look if look is not None else math.ceil(n / look_every)
        return t_radius(n, look_alpha(k, alpha, look_every), df)
    if method == "lai-t-mixture":
        return lai_radius(n, alpha)
    if method == FIXED:
        return t_radius(n, alpha, df)
    raise ValueError(f"unknown sequential method {method!r}: choose one of {METHODS}")


def interval(
    values: Sequence[float],
    alpha: float,
    look_every: int = 2,
    method: str = DEFAULT_METHOD,
    look: int | Look | None = None,
    hosts: Sequence[str] | None = None,
    shift: Shift | None = None,
) -> Change | None:
    """The interval of this look for the mean of i.i.d. block values (log ratios).

    Valid jointly over all looks: the chance that any look's interval, at n = look_every,
    2 look_every, ... blocks, misses the true mean is at most ``alpha`` for normal values
    ("t-spending" needs one call per look, at k = ceil(n / look_every); "lai-t-mixture" is
    valid at every n). None for fewer than 2 values.

    ``mde_pct`` is the minimum detectable effect of this look: the smallest true increase
    whose interval at this n would exclude 0 with about 80% probability, taking the
    sample sd as the truth: half_width + z_0.80 * sd / sqrt(n) on the log scale, in
    percent (``math.inf`` when the interval is unbounded). It tells the gate whether more
    blocks can still resolve a change of interest.

    ``shift``: the two sides were measured in different runs, each shifted as a whole by
    its run (analysis/run_shift.py); that variance is added to the mean's, with
    Satterthwaite's degrees of freedom (t intervals only).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if look_every < 1:
        raise ValueError(f"look_every must be at least 1, got {look_every}")
    if isinstance(look, Look):
        look_every, look = look.every, look.k
    xs = [float(v) for v in values]
    n = len(xs)
    if n < 2:
        return None
    mean = _mean(xs)
    sd, df = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)), n - 1
    if hosts is not None and len(set(hosts)) > 1 and method != "lai-t-mixture":
        sd, df = _within_hosts(xs, hosts)
    if shift is not None and shift.variance > 0 and method != "lai-t-mixture":
        se, df = _with_shift(sd, n, df, shift)
        # the radius of one value (n = 1) at this look's level, with the combined df
        whole = max(1, math.floor(min(df, 1e6)))
        r = radius(n, alpha, look_every, method, look, whole) * math.sqrt(n)
        sd, n_eff = se, 1
    else:
        r, n_eff = radius(n, alpha, look_every, method, look, df), n
    if math.isinf(r):
        return Change(_pct(mean), -100.0, math.inf, n, method, math.inf, alpha)
    half = r * sd
    mde = half + Z_POWER * sd / math.sqrt(n_eff)
    low, high = _pct(mean - half), _pct(mean + half)
    return Change(_pct(mean), low, high, n, method, _pct(mde), alpha)


class Shift(NamedTuple):
    """The variance of the difference between two runs' shifts (log scale), and its
    degrees of freedom (math.inf for a fixed, assumed value)."""

    variance: float
    df: float


def _with_shift(sd: float, n: int, df: float, shift: Shift) -> tuple[float, float]:
    """The standard error of the mean with the runs' shift added, and Satterthwaite's
    degrees of freedom for it."""
    within = sd * sd / n
    se2 = within + shift.variance
    denominator = (within * within / df if df > 0 else math.inf) + (
        shift.variance * shift.variance / shift.df if math.isfinite(shift.df) else 0.0
    )
    return math.sqrt(se2), (se2 * se2 / denominator if denominator > 0 else math.inf)


def _within_hosts(xs: Sequence[float], hosts: Sequence[str]) -> tuple[float, int]:
    """The sd of block values around their own host's mean, and its degrees of freedom.

    Blocks merged from several hosts (docs/scale-out.md): host is one more level of the
    model, a fixed effect, so a host on which the change is larger or smaller shifts its
    own mean instead of counting as noise; each host costs one degree of freedom. The
    estimate stays the mean of all blocks, as balanced shards make it the hosts' average.
    """
    by_host: dict[str, list[float]] = {}
    for x, host in zip(xs, hosts, strict=True):
        by_host.setdefault(host, []).append(x)
    df = len(xs) - len(by_host)
    if df < 1:
        return math.inf, 1
    ss = math.fsum((x - _mean(v)) ** 2 for v in by_host.values() for x in v)
    return math.sqrt(ss / df), df
