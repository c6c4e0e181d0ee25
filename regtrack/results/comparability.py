"""What must be equal before two runs' numbers are compared: the comparability key.

A number depends on more than the Redis code: the machine, the runtime, the load
generator and the settings the workload ran with. Two runs whose keys differ measured
different things, so `ci --baseline-name`, `compare --baseline-run` and the history series
compare only runs with equal keys (or say loudly that they were forced to).

The key is defined here once, from what every run stores (its config, environment and
load generator), so it is the same for a run made today and for one made before the key
existed. Repetitions, durations and verdict settings are not in it: they change how
precise a number is, not what it measures.

Instruction counts also move with the tools that made and ran the server: the valgrind
version (the CPU it presents, how it translates) and the compiler and make variables of
regtrack's builds. A run that counted instructions without recording one of these (no
valgrind version in its environment, a build without its compiler) has it as
``unknown``, which is never equal to anything, another ``unknown`` included: such a
comparison is refused unless forced, and a forced one names it (docs/ci.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from regtrack.core import cycles
from regtrack.core.errors import BadInput
from regtrack.plan.run_plan import RunPlan
from regtrack.results.run_row import Key, RunRow
from regtrack.targets.make_flags import flags_text

# Machine facts that change throughput for reasons other than Redis (environment.py).
MACHINE = ("cpu_model", "cpu_count", "physical_cores", "kernel")
# Workload fields that document it, sweep it or judge its trials: not its traffic.
NOT_TRAFFIC = ("description", "models", "approximations", "min_redis", "pipelines", "tolerance_pct")
# Facts the key gained after runs were stored with it: derived from such a run's config.
ADDED = (
    "throughput method", "valgrind", "compiler", "build flags", "cache simulation",
    "cycle weights",
)  # fmt: skip
# How instruction trials ran and what counted them: compared only when both runs counted
# instructions (a run that did not has None).
# The simulated caches and the cycle weights matter only when both runs simulated them (a
# run that counted instructions alone has no cycles to compare; its instructions are the
# same under the simulation).
INSTRUCTION_FACTS = (
    "instruction requests", "callgrind hz", "valgrind", "compiler", "build flags",
    "cache simulation", "cycle weights",
)  # fmt: skip
# A fact a run that counted instructions did not record: never equal, not even to itself.
UNKNOWN = "unknown"
# The compiler and build flags of a run whose versions regtrack did not build (bin:).
NOT_BUILT = "not built by regtrack"


def key(plan: RunPlan, environment: Mapping[str, Any], loadgen: Mapping[str, Any]) -> dict:
    """The run's comparability key: plain JSON, one entry per fact that must match."""
    dumped = plan.workload.model_dump()
    workload = {k: v for k, v in dumped.items() if k not in NOT_TRAFFIC}
    if not workload.get("server"):  # no settings: as runs made before settings existed
        workload.pop("server", None)
    counted = plan.counted
    data = plan.server_data
    counts_only = plan.metric in cycles.COUNTING_ONLY
    facts: dict[str, Any] = {f"machine.{k}": environment.get(k) for k in MACHINE}
    facts.update(
        {
            "runtime": plan.runtime,
            "docker images": plan.docker_images if plan.runtime == "docker" else None,
            "memory limit": plan.memory,
            # With AOF or RDB on, the filesystem the server writes to is measured too.
            "server data filesystem": data.filesystem if data and data.persistent else None,
            "server cpus": plan.cpus.server_list if plan.cpus else None,
            "client cpus": plan.cpus.client_list if plan.cpus else None,
            # Windows paired in time and separate trials measure throughput differently.
            "throughput method": None if counts_only else plan.throughput_method,
            "load generator": loadgen.get("name"),
            "load generator binary": loadgen.get("sha256") or loadgen.get("image_id"),
            "instruction requests": plan.settings.instruction_requests if counted else None,
            "callgrind hz": plan.callgrind_hz if counted else None,
            "valgrind": (environment.get("valgrind") or UNKNOWN) if counted else None,
            "cache simulation": (plan.cache_geometry or UNKNOWN) if plan.simulated else None,
            "cycle weights": plan.settings.cycle_weights.text() if plan.simulated else None,
            **_builds(plan, counted),
        }
    )
    facts.update({f"workload.{k}": v for k, v in sorted(workload.items())})
    if plan.settings.rtt_us is not None:  # --rtt; absent otherwise: older digests stay theirs
        facts["network round trip (us)"] = plan.settings.rtt_us
    return facts


def _builds(plan: RunPlan, counted: bool) -> dict[str, str | None]:
    """The compiler and make variables of the run's versions built from source (one
    compiler and one flag set for all of a run's builds; several are joined by "; ")."""
    if not counted:
        return {"compiler": None, "build flags": None}
    builds = [t.build for t in plan.targets if t.build is not None]
    if not builds:
        return {"compiler": NOT_BUILT, "build flags": NOT_BUILT}
    compilers = {b.compiler or UNKNOWN for b in builds}
    flags = {flags_text(b.flags, b.environment) if b.flags is not None else UNKNOWN for b in builds}
    return {
        "compiler": UNKNOWN if UNKNOWN in compilers else "; ".join(sorted(compilers)),
        "build flags": UNKNOWN if UNKNOWN in flags else "; ".join(sorted(flags)),
    }


def of_run(run: RunRow) -> Key:
    """A stored run's key: as stored when it was created, or, for a run older than the
    key, derived from the same stored facts."""
    derived = key(run.plan, run.environment.shown(), run.loadgen.shown())
    if run.comparability:
        # A fact added to the key later is derived for a run stored before it.
        return {**{k: derived[k] for k in ADDED if k in derived}, **run.comparability}
    return derived


def digest(facts: Mapping[str, Any]) -> str:
    """A short hash of a key: what a history series is keyed on."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Every fact that differs, as ``clients 10 != 50`` (baseline's value first); how
    instructions were counted matters only when both runs counted them, and a fact
    either run did not record (``unknown``) is a difference too."""
    names = sorted(set(baseline) | set(candidate))
    return [
        f"{name.removeprefix('workload.').removeprefix('machine.')} "
        f"{_shown(baseline.get(name), candidate.get(name))}"
        for name in names
        if _differ(name, baseline.get(name), candidate.get(name))
    ]


def _differ(name: str, baseline: Any, candidate: Any) -> bool:
    if name in INSTRUCTION_FACTS and None in (baseline, candidate):
        return False
    return baseline != candidate or UNKNOWN in (baseline, candidate)


def refuse_unless_forced(
    what: str, baseline: Mapping[str, Any], candidate: Mapping[str, Any], force: bool, instead: str
) -> list[str]:
    """The differences between two runs' comparability keys: refused (exit 2) unless
    ``force``, and then returned so that every output can say the comparison was forced."""
    diffs = differences(baseline, candidate)
    if diffs and not force:
        raise BadInput(
            f"{what} was not measured like this one ({'; '.join(diffs)}): its numbers are "
            f"not comparable. {instead}, or pass --force"
        )
    return diffs


def _shown(baseline: Any, candidate: Any) -> str:
    """``a != b``, long hashes cut short unless that would make them look alike."""
    pair = _show(baseline), _show(candidate)
    if pair[0] == pair[1]:
        pair = _show(baseline, cut=False), _show(candidate, cut=False)
    return " != ".join(pair)


def _show(value: Any, cut: bool = True) -> str:
    """A value as the differences show it; a long word (a hash) cut to its start, text
    such as a compiler's version line in full."""
    if cut and isinstance(value, str) and len(value) > 24 and " " not in value:
        return value[:12] + "..."
    return json.dumps(value) if not isinstance(value, str) else value
