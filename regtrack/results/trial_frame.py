"""The frames analysis reads a run's stored rows in, and their one declaration: each frame's
columns are its record's fields (results/stored_trials.py), in order, with the dtype of the
field's type, then the columns derived here. Built and checked here, so analysis never
meets a missing column, even in a run with no trials, nor a column whose dtype depends on
the values one run happened to hold (pandas makes a column of None ``object``).

Dtypes: an integer that may be missing is pandas' nullable ``Int64``; text is pandas' ``str``
(NaN where missing); a boolean never misses; structures (params, reasons, argv) are
``object``. Values were checked where the rows were read (results/stored_values.py).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, get_args, get_origin, get_type_hints

import numpy as np
import pandas as pd

from regtrack.results.stored_trials import StoredCommand, StoredCost, StoredTrial, point_order


def dtype(hint: Any) -> str:
    """The frame dtype of a record field's type (a field of another type needs one here)."""
    kinds = set(get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
    optional = type(None) in kinds
    (kind,) = kinds - {type(None)}
    if kind is int:
        return "Int64" if optional else "int64"
    if kind is float:
        return "float64"
    if kind is str:
        return "str"
    if kind is bool and not optional:
        return "bool"
    if get_origin(kind) in (tuple, Mapping):
        return "object"
    raise TypeError(f"no frame dtype is declared for a field of type {hint}")


def _declared(record: type, derived: Mapping[str, str] | None = None) -> dict[str, str]:
    fields = {name: dtype(hint) for name, hint in get_type_hints(record).items()}
    return fields | dict(derived or {})


# A run's trials (LoadedRun.trials): each StoredTrial field, then the point's sort key,
# syscalls per server call (NaN where the server counted no calls), and per operation the
# server's CPU time and its calls (a lifecycle's operations are tasks; NaN without any),
# and per server call the simulated cycles and misses (NaN where not simulated).
SIMULATED = ("cycles", "l1_misses", "ll_misses", "branch_misses")
TRIALS = _declared(
    StoredTrial,
    {
        "point_order": "int64", "syscalls_per_op": "float64",
        "server_cpu_us_per_op": "float64", "commands_per_op": "float64",
        **{f"{name}_per_op": "float64" for name in SIMULATED},
    },
)  # fmt: skip
# A run's function costs (RunCosts.costs): each StoredCost field.
COSTS = _declared(StoredCost)
# A run's command rows (analysis/commands.py): each StoredCommand field.
COMMANDS = _declared(StoredCommand)


class FrameError(ValueError):
    """A record's value that its column's dtype cannot hold: a record made wrongly, since
    the store's are checked as they are read."""


def trials(rows: Sequence[StoredTrial]) -> pd.DataFrame:
    """A run's trials, one row each (columns: TRIALS)."""
    frame = _fields(rows, StoredTrial, TRIALS, "trials")
    frame["point_order"] = np.array([point_order(p) for p in frame["params"]], dtype=np.int64)
    calls = frame["server_calls"].astype("float64")
    syscalls = frame["syscalls_read"].astype("float64") + frame["syscalls_write"].astype("float64")
    # every syscall where the kernel counted them by name; read and write alone otherwise
    named = [float(sum(c.values())) if c is not None else np.nan for c in frame["syscalls_by_name"]]
    syscalls = pd.Series(named, index=frame.index, dtype="float64").fillna(syscalls)
    frame["syscalls_per_op"] = syscalls / calls.where(calls > 0)
    requests = frame["requests"].astype("float64")
    per = requests.where(requests > 0)
    frame["server_cpu_us_per_op"] = np.array([_cpu_s(s) for s in frame["server_stats"]]) * 1e6 / per
    frame["commands_per_op"] = calls / per
    for name in SIMULATED:
        frame[f"{name}_per_op"] = frame[name].astype("float64") / calls.where(calls > 0)
    return checked(frame, TRIALS, "trials")


def _cpu_s(stats: Mapping[str, Any] | None) -> float:
    """The server's CPU seconds around a trial (its INFO delta), NaN where not stored."""
    value = stats.get("server_cpu_s") if stats else None
    return float(value) if isinstance(value, int | float) else float("nan")


def costs(rows: Sequence[StoredCost]) -> pd.DataFrame:
    """A run's per-function costs, one row per trial and function (columns: COSTS)."""
    frame = _fields(rows, StoredCost, COSTS, "function costs")
    return checked(frame, COSTS, "function costs")


def commands(rows: Sequence[StoredCommand]) -> pd.DataFrame:
    """A run's command rows, one per trial, source and command (columns: COMMANDS)."""
    frame = _fields(rows, StoredCommand, COMMANDS, "command stats")
    return checked(frame, COMMANDS, "command stats")


@functools.cache
def _dtype(kind: str) -> Any:
    return pd.api.types.pandas_dtype(kind)


def checked(frame: pd.DataFrame, declared: Mapping[str, str], what: str) -> pd.DataFrame:
    """``frame`` if it has exactly the declared columns, in order, with their dtypes."""
    if list(frame.columns) != list(declared):
        missing = [c for c in declared if c not in frame.columns]
        other = [c for c in frame.columns if c not in declared]
        why = (
            f"lacks {missing[0]}" if missing
            else f"has {other[0]}, which is not declared" if other
            else "has its columns in another order than declared"
        )  # fmt: skip
        raise FrameError(f"the {what} frame {why}")
    dtypes = dict(zip(frame.columns, frame.dtypes, strict=True))
    for name, kind in declared.items():
        if dtypes[name] != _dtype(kind):
            raise FrameError(f"the {what} frame's {name} is {dtypes[name]}, not {kind}")
    return frame


def _fields(
    rows: Sequence[NamedTuple], record: type, declared: Mapping[str, str], what: str
) -> pd.DataFrame:
    """A frame of ``record``'s fields, each column built as an array of its declared
    dtype (a Series per column cost milliseconds per frame, and a report or a bisection
    builds thousands of frames)."""
    names = record._fields  # type: ignore[attr-defined]
    values = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    columns = {}
    for name, column in zip(names, values, strict=True):
        kind = declared[name]
        try:
            columns[name] = _array(column, kind)
        except (TypeError, ValueError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FrameError(f"the {what} frame's {name} cannot be {kind}: {first}") from None
    return pd.DataFrame(columns, copy=False)


def _array(column: tuple, kind: str) -> Any:
    if kind == "object":  # structures stay whole (numpy would unpack a tuple of tuples)
        out = np.empty(len(column), dtype=object)
        out[:] = column
        return out
    if kind == "bool" and any(type(v) is not bool for v in column):
        raise TypeError("a value is not True or False")  # pandas takes any as truthy
    return pd.array(column, dtype=_dtype(kind))
