"""How a field of core/options.Options is a command-line option: its Spec (help, stage,
type, each command's default), the defaults several options share, and the parsing of a
list of pipeline depths. Apart from the Options record itself, which declares them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from regtrack.core import limits
from regtrack.core.limits import Bound

# The stages an option belongs to, in the order `--help` shows them (docs/layout.md's pipeline).
STAGES = ("versions", "workload", "CPUs", "measuring", "statistics", "output")
MEASURING = ("run", "ci", "bisect")


@dataclass(frozen=True)
class GetSweep:
    """A default that holds only for the GET sweep (get-pipeline): a mix has no depths."""

    depths: tuple[int, ...]

    def __str__(self) -> str:
        return f"{','.join(map(str, self.depths))} for get-pipeline, else the workload's"


@dataclass(frozen=True)
class Spec:
    """How one field is an option: its help, stage, type and each command's default."""

    help: str
    stage: str
    commands: tuple[str, ...] = MEASURING  # which of run, ci and bisect have it
    defaults: Mapping[str, Any] = field(default_factory=dict)  # a command's own default
    helps: Mapping[str, str] = field(default_factory=dict)  # a command's own help
    choices: tuple[str, ...] = ()
    command_choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kind: str = "str"  # str | int | float | flag | ints (1,10,30) | path
    bound: Bound | None = None  # a number's allowed range (core/limits.py)
    multiple: bool = False
    flag: str | None = None  # the spelling, when not --field-name
    off_flag: str | None = None  # a flag's negative spelling, e.g. --no-report
    metavar: str | None = None
    envvar: str | None = None
    setting: str | None = None  # the RunSettings field that is the default when None
    unset: str | None = None  # what None means, for --help: "the workload's"

    def default(self, command: str, base: Any) -> Any:
        """The default ``command`` uses (``base``: the field's own)."""
        return self.defaults.get(command, base)


def option(default: Any, help: str, stage: str, **spec: Any) -> Any:
    """A field of Options that is a command-line option."""
    return field(default=default, metadata={"option": Spec(help=help, stage=stage, **spec)})


RUN_CI = ("run", "ci")
# ci and bisect: GET pipeline depths where the server (not the load generator) is the
# bottleneck on 2 cores, short trials in many blocks (block-to-block noise dominates,
# docs/methodology.md), two blocks to start.
GET_SWEEP = GetSweep((10, 30))
IN_BLOCKS = ("ci", "bisect")


T = TypeVar("T")


def in_blocks(value: T) -> dict[str, T]:
    """The one default of the commands that measure short trials in blocks (IN_BLOCKS)."""
    return dict.fromkeys(IN_BLOCKS, value)


# Not a field of Options: a verdict threshold says how answers are read, not how versions
# are measured, and compare (which measures nothing) takes it too. Declared once for every
# command that reads verdicts; None: regtrack.toml [verdict], each metric's own.
THRESHOLD = Spec(
    help="Verdict threshold in percent, for every metric (bisect: the smallest change that "
    "counts).",
    stage="statistics",
    commands=("run", "ci", "compare", "bisect"),
    kind="float",
    bound=limits.PERCENT,
    unset="regtrack.toml [verdict], per metric",
)


def int_list(value: str | list[int] | tuple[int, ...]) -> list[int]:
    """ "1,10,30" (or a list, from a config file) -> [1, 10, 30]; else one ValueError line.

    Pipeline depths: each within limits.PIPELINE, at most limits.PIPELINE_DEPTHS of them."""
    shown = limits.shown(value)
    try:
        if isinstance(value, str):
            values = [int(v) for v in value.split(",") if v.strip()]
        else:
            values = [int(v) for v in value]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{shown}: give comma-separated numbers like 1,10,30") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{shown}: give positive numbers like 1,10,30")
    if len(values) > limits.PIPELINE_DEPTHS:
        raise ValueError(f"{shown}: give at most {limits.PIPELINE_DEPTHS} depths")
    for v in values:
        if not limits.PIPELINE.holds(v):
            raise ValueError(limits.PIPELINE.refusal(v, int))
    return values
