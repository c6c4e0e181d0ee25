"""Settings files: found, parsed and validated before anything runs.

A mistake in a file is reported as one line naming the file, the field and what to do,
because a benchmark that dies twenty minutes in on a typo wastes the user's afternoon.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from regtrack.core import cycles, limits
from regtrack.core.errors import BadInput

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # regtrack/
DEFAULT_DB = Path("reports") / "regtrack.db"


def builtin_config_dir() -> Path:
    """configs/ of the source tree (editable install) or the copy packed into the wheel."""
    for candidate in (PACKAGE_DIR / "_configs", PACKAGE_DIR.parent / "configs"):
        if (candidate / "workloads").is_dir():
            return candidate
    raise BadInput("regtrack's built-in configs/ directory is missing: reinstall regtrack")


def user_config_dir() -> Path:
    """$XDG_CONFIG_HOME/regtrack, else ~/.config/regtrack: the user's own settings."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "regtrack"


def config_dirs(extra: Path | None = None) -> list[Path]:
    """Where settings and workloads are looked up, first match wins: directories named
    explicitly (``regtrack --config DIR``, which sets $REGTRACK_CONFIG_DIR), the user's
    (user_config_dir), then the built-in one. Never the working directory: in CI that is
    the pull request's checkout, which could raise its own thresholds or redefine the
    workload."""
    dirs = []
    if extra is not None:
        dirs.append(extra)
    env = os.environ.get("REGTRACK_CONFIG_DIR")
    if env:
        dirs.append(Path(env))
    dirs.append(user_config_dir())
    dirs.append(builtin_config_dir())
    seen: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [s.resolve() for s in seen]:
            seen.append(d)
    return seen


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RunSettings(_Strict):
    """How long and how often each point is measured, and what makes a trial invalid.

    Every number has an upper bound (core/limits.py says why each is where it is): the
    settings file may be a pull request's."""

    duration: limits.DURATION_S.of(float) = 10.0  # seconds measured per trial
    warmup: limits.WARMUP_S.of(float) = 2.0  # seconds run before each trial
    repetitions: limits.REPETITIONS.of(int) = 3
    client_bound_cpu_pct: limits.PERCENT.of(float) = 90.0
    # A saturation workload's server below this busy share was not the bottleneck (a GET
    # sweep's runs at 97-99% when the client keeps up): "not server-bound". 0 turns it off.
    server_bound_cpu_pct: limits.PERCENT_OR_OFF.of(float) = 85.0
    contention_limit_pct: limits.PERCENT.of(float) = 10.0
    server_start_timeout: limits.SERVER_START_S.of(float) = 20.0
    instruction_requests: limits.INSTRUCTION_REQUESTS.of(int) = 200_000
    repeatability_pct: limits.PERCENT.of(float) = 0.5
    # "time": the throughput of several versions is measured paired in time, their servers
    # up together and the load moved between them in windows of ``window`` seconds
    # (bench/paired.py); "duet": all of them at once, each server and its load generator
    # on CPUs of their own (hosts with 2 CPUs per version); "separate": one server after
    # the other, a trial each.
    pairing: Literal["time", "duet", "separate"] = "time"
    window: limits.WINDOW_S.of(float) = 0.1  # docs/methodology.md: A/A runs
    # "fixed": each repetition's servers read regtrack's seed bytes from /dev/urandom
    # (common random numbers, regtrack/bench/seeds.py); "random": Redis seeds itself.
    seeds: Literal["fixed", "random"] = "fixed"
    # Which seeds a run's repetitions read: repetition r reads seed offset + r. Unset, each
    # run draws its own (stored in the run's settings); 0 gives the seeds every run read
    # before offsets existed, e.g. to keep a history free of seed effects.
    seed_offset: limits.SEED_OFFSET.of(int) | None = None
    # --metric cycles: what one event costs, in cycles beyond its instruction (core/cycles.py;
    # measured on this machine by benchmarks/cycle_weights.py, docs/methodology.md). Part
    # of the comparability key: runs weighed otherwise are not compared.
    cycle_weight_l1: limits.CYCLE_WEIGHT.of(float) = 10.0
    cycle_weight_ll: limits.CYCLE_WEIGHT.of(float) = 200.0
    cycle_weight_branch: limits.CYCLE_WEIGHT.of(float) = 10.0
    # --rtt: the network round trip every load generator's requests cross (a delay proxy
    # on the client CPUs, bench/delay_proxy.py), in microseconds; None: none added. Part of
    # the comparability key: runs behind different round trips are not compared as alike.
    rtt_us: limits.RTT_US.of(int) | None = None
    database: str = str(DEFAULT_DB)

    @property
    def cycle_weights(self) -> cycles.Weights:
        return cycles.Weights(self.cycle_weight_l1, self.cycle_weight_ll, self.cycle_weight_branch)


class Thresholds(_Strict):
    """The smallest change (percent) worth calling a regression or improvement, per metric.

    Defaults come from the measurements in docs/methodology.md; --threshold sets one
    value for every metric.
    """

    # At most 100%: a throughput threshold beyond it could never be crossed, so it would
    # switch the gate off.
    throughput: limits.PERCENT.of(float) = 5.0
    latency: limits.PERCENT.of(float) = 10.0
    instructions: limits.PERCENT.of(float) = 1.0
    syscalls: limits.PERCENT.of(float) = 2.0
    # Simulated cycles per op (--metric cycles) and the misses shown beside them (never
    # gating): docs/methodology.md "Simulated cycles", A/A spreads.
    cycles: limits.PERCENT.of(float) = 1.0
    misses: limits.PERCENT.of(float) = 5.0
    # Open-loop latency percentiles at a declared load (bench/latency_trial.py). p99 (gated
    # by ci) from A/A gates on a 2-vCPU VM, docs/methodology.md "Latency percentiles"; p50
    # and p99.9 (never gated) are placeholders the simulation there only orders.
    open_loop_p50: limits.PERCENT.of(float) = 5.0
    open_loop_p99: limits.PERCENT.of(float) = 35.0
    open_loop_p999: limits.PERCENT.of(float) = 20.0

    def uniform(self, pct: float) -> Thresholds:
        """The same threshold for every metric (--threshold, or a stored bisection's),
        within the file's range: one line otherwise, not a validation traceback."""
        if not limits.PERCENT.holds(pct):
            raise BadInput(f"threshold {limits.PERCENT.refusal(pct)}")
        return Thresholds(**dict.fromkeys(Thresholds.model_fields, pct))

    def for_metric(self, name: str) -> float:
        """A metric's threshold; a lifecycle's metrics share their kin's: tasks/s and server
        CPU per task (and the enqueue rate) throughput's, task latency open-loop latency's,
        commands and round trips per task syscalls' (counted, nearly deterministic)."""
        name = _KIN.get(name, name)
        if name in ("open_loop_p50", "open_loop_p99", "open_loop_p999"):
            return float(getattr(self, name))
        if name == "throughput":
            return self.throughput
        if name.startswith("latency"):
            return self.latency
        if name == "instructions_per_op":
            return self.instructions
        if name == "cycles_per_op":
            return self.cycles
        if name in ("l1_misses_per_op", "ll_misses_per_op", "branch_misses_per_op"):
            return self.misses
        return self.syscalls


_KIN = {
    "tasks_per_sec": "throughput", "server_cpu_per_task": "throughput",
    "enqueue_per_sec": "throughput",
    "task_p50": "open_loop_p50", "task_p99": "open_loop_p99",
}  # fmt: skip


def one_line(error: ValidationError) -> str:
    """The first problem as "field 'commands[2].ratio': ...": where, what, and the fix."""
    first = error.errors()[0]
    where = ""
    for part in first["loc"]:
        where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field (check its spelling against docs/workloads.md)"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"field {where!r}: {msg}{more}" if where else f"{msg}{more}"


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML: {exc}") from None


def _section(path: Path, name: str) -> dict[str, Any]:
    section = read_toml(path).get(name, {})
    if not isinstance(section, dict):
        raise BadInput(f"{path}: [{name}] is not a table: write it as a [{name}] section")
    return section


def _settings_file() -> Path | None:
    """``regtrack --config FILE`` ($REGTRACK_CONFIG), else the first config directory's."""
    named = os.environ.get("REGTRACK_CONFIG")
    if named:
        return Path(named)
    return next(
        (d / "regtrack.toml" for d in config_dirs() if (d / "regtrack.toml").is_file()), None
    )


def option_defaults() -> tuple[Path | None, dict[str, Any]]:
    """The settings file's [defaults] table: option defaults for every command, and in
    [defaults.COMMAND] tables for one (cli/options.py checks the names against them)."""
    source = _settings_file()
    return source, (_section(source, "defaults") if source else {})


def settings_source() -> str:
    """The settings file in use, as a run records it ("built-in" for regtrack's own)."""
    path = _settings_file()
    builtin = builtin_config_dir() / "regtrack.toml"
    return "built-in" if path is None or path.resolve() == builtin.resolve() else str(path)


def load_settings(path: Path | None = None, **overrides: Any) -> RunSettings:
    """Defaults < configs/regtrack.toml < explicit overrides (command-line options)."""
    data: dict[str, Any] = {}
    source = path or _settings_file()
    if source is not None:
        data = _section(source, "run")
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return RunSettings(**data)
    except ValidationError as exc:
        origin = f"{source} [run]" if source else "settings"
        raise BadInput(f"{origin}: {one_line(exc)}") from None


def load_thresholds(uniform_pct: float | None = None, path: Path | None = None) -> Thresholds:
    """configs/regtrack.toml [verdict], with one threshold for every metric if given
    (checked against its range by Thresholds.uniform)."""
    source = path or _settings_file()
    data = _section(source, "verdict") if source else {}
    if "throughput_gate_pct" in data or "throughput_gate" in data:
        raise BadInput(
            f"{source} [verdict]: throughput_gate_pct is gone: `regtrack ci` now decides "
            "throughput at throughput_pct, paired in time (docs/methodology.md); delete the line"
        )
    spelled = {k.removesuffix("_pct"): k for k in data}  # as the file writes them
    try:
        thresholds = Thresholds(**{name: data[key] for name, key in spelled.items()})
    except ValidationError as exc:
        name = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
        line = one_line(exc).replace(f"field {name!r}", f"field {spelled.get(name, name)!r}", 1)
        raise BadInput(f"{source} [verdict]: {line}") from None
    return thresholds.uniform(uniform_pct) if uniform_pct is not None else thresholds
