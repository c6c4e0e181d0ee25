"""One plan shared by N hosts: blocks that stay on one host, and which shard measures which.

An engine a team already runs (a CI matrix, a Kubernetes Indexed Job) starts N copies of
one job and tells each "you are K of N". Each copy measures a deterministic share of the
same plan, and `regtrack merge` unions the shares. What must never be split across hosts
is a *block*: the trials whose comparison is only fair on one machine at one time.

* throughput: the balanced A B / B A pair of repetitions (2k, 2k+1) of every target, so
  drift and host speed cancel inside the block;
* instructions: one repetition of every target, the seed-matched set (seeds depend only
  on the repetition and the plan's seed offset), so each pair is measured under one CPU
  and one valgrind.

Blocks go to shards greedily, largest first, each to the shard with the least work so far
(ties by plan order): every shard gets about the same number of trials, and the same plan
gives the same split on every host. Trial ``seq`` numbers are the full plan's, so a merge
can tell exactly which planned trials each shard measured.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from regtrack.bench import seeds
from regtrack.bench.plan import Visit
from regtrack.core import limits
from regtrack.core.errors import BadInput
from regtrack.plan.records import Shard

# The variables each engine sets where it means a split; the index is 0-based unless noted.
ENGINES = (
    # Kubernetes Indexed Job: 0-based index; the count is not in the pod's environment.
    ("JOB_COMPLETION_INDEX", None, 0),
    # GitLab CI `parallel: N`: 1-based. GitLab sets the same two for `parallel: matrix`
    # jobs, which are not a split (see _gitlab_split).
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", 1),
    # Buildkite `parallelism: N`: 0-based.
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),
)
# GitLab names the copies of a `parallel: N` job "NAME K/N"; a matrix job is "NAME: [a, b]".
GITLAB_SPLIT_NAME = re.compile(r" (\d+)/(\d+)$")
COUNT_VARIABLE = "REGTRACK_SHARD_COUNT"  # the count where the engine does not give one
# The pipeline every shard of one plan runs in: its id gives them one seed offset (the
# same for a retried job, which must measure the plan its siblings measured).
PIPELINE_VARIABLES = ("GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID")


def parse(text: str, source: str = "--shard") -> Shard:
    """ "K/N" with 1 <= K <= N; anything else is one clear line."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise BadInput(f"{source} {text!r}: give K/N, e.g. --shard 2/8") from None
    if not 1 <= k <= n:
        raise BadInput(f"{source} {text!r}: K must be between 1 and N (shards count from 1)")
    if not limits.SHARDS.holds(n):
        raise BadInput(f"{source} {text!r}: N {limits.SHARDS.refusal(n, int)}")
    return Shard(k, n, source)


def from_environment(env: Mapping[str, str], count: int | None = None) -> Shard | None:
    """The shard an engine's variables name, or None when no engine set one.

    ``count`` (``--shard-count``, else $REGTRACK_SHARD_COUNT) is required for engines
    that do not say how many copies they run, and must agree with those that do.
    """
    if count is None and env.get(COUNT_VARIABLE):
        try:
            count = int(env[COUNT_VARIABLE])
        except ValueError:
            raise BadInput(f"{COUNT_VARIABLE}={env[COUNT_VARIABLE]!r}: give a number") from None
    for index_var, count_var, base in ENGINES:
        if not env.get(index_var):
            continue
        if index_var == "CI_NODE_INDEX" and not _gitlab_split(env):
            continue
        try:
            index = int(env[index_var]) - base + 1
            total = int(env[count_var]) if count_var and env.get(count_var) else None
        except ValueError:
            raise BadInput(f"{index_var}={env[index_var]!r}: not a shard index") from None
        if total is not None and count is not None and total != count:
            raise BadInput(
                f"{count_var}={total} but --shard-count {count}: give one count, or none"
            )
        total = total if total is not None else count
        if total is None:
            raise BadInput(
                f"{index_var} is set but not how many shards there are: give --shard-count N "
                f"(or {COUNT_VARIABLE}=N), the Job's completions"
            )
        return parse(f"{index}/{total}", index_var)
    return None


def _gitlab_split(env: Mapping[str, str]) -> bool:
    """Whether GitLab's CI_NODE_INDEX/CI_NODE_TOTAL come from `parallel: N` (a split of
    one job: its copies are named "NAME K/N") rather than from `parallel: matrix` (other
    jobs, one per combination of variables, which each measure their whole plan). GitLab
    sets the two variables for both; only the job's name tells them apart."""
    found = GITLAB_SPLIT_NAME.search(env.get("CI_JOB_NAME", ""))
    return bool(found) and found.groups() == (env["CI_NODE_INDEX"], env.get("CI_NODE_TOTAL"))


def block_key(visit: Visit) -> tuple[str, int]:
    """The block a visit belongs to: (mode, first repetition of the block)."""
    if visit.mode == "instructions":
        return visit.mode, visit.repetition
    return visit.mode, visit.repetition - visit.repetition % 2


def blocks(visits: list[Visit]) -> list[list[Visit]]:
    """The plan's visits grouped into blocks, in plan order."""
    grouped: dict[tuple[str, int], list[Visit]] = {}
    for visit in visits:
        grouped.setdefault(block_key(visit), []).append(visit)
    return list(grouped.values())


def assign(visits: list[Visit], count: int) -> list[int]:
    """For each block of ``visits`` (plan order), the shard (1-based) that measures it."""
    found = blocks(visits)
    load = [0] * count
    owner = [0] * len(found)
    sizes = sorted(range(len(found)), key=lambda i: (-sum(len(v.trials) for v in found[i]), i))
    for i in sizes:
        shard = min(range(count), key=lambda s: (load[s], s))
        owner[i] = shard + 1
        load[shard] += sum(len(v.trials) for v in found[i])
    return owner


def share(visits: list[Visit], shard: Shard | None) -> list[Visit]:
    """The visits shard ``shard`` measures (all of them without sharding), in plan order."""
    if shard is None:
        return visits
    found = blocks(visits)
    owners = assign(visits, shard.count)
    mine = {id(v) for block, owner in zip(found, owners, strict=True) if owner == shard.index
            for v in block}  # fmt: skip
    return [v for v in visits if id(v) in mine]


def counts(visits: list[Visit], shard: Shard) -> tuple[int, int]:
    """(blocks shard ``shard`` measures, blocks in the plan)."""
    owners = assign(visits, shard.count)
    return sum(1 for owner in owners if owner == shard.index), len(owners)


def seed_offset(env: Mapping[str, str]) -> int:
    """The seed offset every shard of a plan derives alike (bench/seeds.py): from the CI
    pipeline's id where the engine gives one, so another pipeline measures other seeds;
    else 0 (a Kubernetes Job: set ``seed_offset`` in the settings to move them)."""
    for name in PIPELINE_VARIABLES:
        if env.get(name):
            return seeds.offset_for(f"{name}={env[name]}")
    return 0


def current(option: str | None, count: int | None) -> Shard | None:
    """The shard of this process: ``--shard`` if given, else the engine's variables."""
    if option:
        shard = parse(option)
        if count is not None and count != shard.count:
            raise BadInput(f"--shard {option} and --shard-count {count} disagree")
        return shard
    return from_environment(os.environ, count)
