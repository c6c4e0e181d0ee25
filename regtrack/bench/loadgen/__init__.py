"""Load generators: build a command line, run it pinned, parse what it reports.

Three tools, one interface: ``locate`` picks the one binary for a whole run, ``run`` sends
the load of one trial (several load generator processes side by side for mixes with
producers and consumers) for a time or a request count.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from regtrack.bench.loadgen import builtin, driver, memtier, openloop, redis_benchmark
from regtrack.bench.loadgen.base import Aim, LoadgenBinary, LoadgenResult
from regtrack.core.errors import BadInput
from regtrack.core.records import LoadSpec

BY_NAME = {redis_benchmark.NAME: redis_benchmark, memtier.NAME: memtier, builtin.NAME: builtin}


def locate(tool: str, path: str | None = None, built: list[str] | None = None) -> LoadgenBinary:
    """The one load generator binary of a run."""
    if tool == "builtin":
        if path:
            raise BadInput("--loadgen-bin does not apply to --loadgen builtin")
        return builtin.locate()
    if tool == "memtier":
        return memtier.locate(path)
    if tool == driver.NAME:  # a user's own program: --driver's first word, as the path
        assert path is not None, "a driver's program"
        return driver.locate([path])
    if tool == openloop.NAME:  # a lifecycle's producers and consumers
        if path:
            raise BadInput("--loadgen-bin does not apply to a task lifecycle (the engine runs it)")
        return openloop.locate()
    return redis_benchmark.locate(path, built)


def run(
    binary: LoadgenBinary,
    aim: Aim,
    specs: list[LoadSpec],
    *,
    seconds: float | None = None,
    requests: int | None = None,
    timeout: float,
) -> LoadgenResult:
    """Send the load of one trial. Several specs run at once, their results added up."""
    module = BY_NAME[binary.name]

    def one(spec: LoadSpec, share: int | None) -> LoadgenResult:
        if module is redis_benchmark:
            assert share is not None, "redis-benchmark runs a request count"
            return redis_benchmark.run_once(aim, spec, share, timeout)
        return module.run_once(aim, spec, test_time=seconds, requests=share, timeout=timeout)

    if len(specs) == 1:
        return one(specs[0], requests)
    clients = sum(s.clients for s in specs)
    shares = [None if requests is None else max(1, requests * s.clients // clients) for s in specs]
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        results = list(pool.map(one, specs, shares))
    return combine(results)


def combine(results: list[LoadgenResult]) -> LoadgenResult:
    """Results of load generator processes that ran side by side, as one."""
    per_command: dict[str, dict[str, float]] = {}
    for r in results:
        for name, row in r.per_command.items():
            into = per_command.setdefault(name, {})
            for key in ("count", "ops_per_sec"):
                if key in row:
                    into[key] = into.get(key, 0.0) + row[key]
    problems = [r.problem for r in results if r.problem]
    return LoadgenResult(
        argv=[arg for r in results for arg in [*r.argv, "+"]][:-1],
        exit_code=next((r.exit_code for r in results if r.exit_code), 0),
        wall_s=max(r.wall_s for r in results),
        client_cpu_s=sum(r.client_cpu_s for r in results),
        requests=sum(r.requests for r in results),
        ops_per_sec=sum(r.ops_per_sec or 0.0 for r in results) or None,
        latency_ms={},
        raw_output="\n[next process]\n".join(r.raw_output for r in results),
        problem="; ".join(problems) if problems else None,
        per_command=per_command,
        parts=results,
    )


def sequence(results: list[LoadgenResult]) -> LoadgenResult:
    """Load generator runs made one after the other against one server, as one: times,
    requests and CPU add up; several processes stay apart (their counts add up per process)."""
    first = results[0]
    parts: list[LoadgenResult] = []
    if first.parts:
        parts = [sequence([r.parts[i] for r in results]) for i in range(len(first.parts))]
    wall = sum(r.wall_s for r in results)
    requests = sum(r.requests for r in results)
    problems = [r.problem for r in results if r.problem]
    return LoadgenResult(
        argv=results[-1].argv,
        exit_code=next((r.exit_code for r in results if r.exit_code), 0),
        wall_s=wall,
        client_cpu_s=sum(r.client_cpu_s for r in results),
        requests=requests,
        ops_per_sec=requests / wall if wall else None,
        latency_ms={},
        raw_output="\n[next run]\n".join(r.raw_output for r in results),
        problem="; ".join(problems) if problems else None,
        per_command={},
        parts=parts,
    )
