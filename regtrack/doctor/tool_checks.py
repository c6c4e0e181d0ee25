"""Checks of the tools a run needs (load generator, pinning, building, callgrind, Docker)
and of the hash seeds. Each check is a function of facts found, so tests give it others."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from regtrack.bench import seeds
from regtrack.bench.loadgen import memtier, openloop
from regtrack.bench.runtimes import docker
from regtrack.core import child_env, docker_engine
from regtrack.core.checkup import Check, Status
from regtrack.core.errors import RegtrackError

# The tools doctor looks for, with the argument that prints each one's version.
TOOLS = {
    "memtier_benchmark": "--version",
    "redis-benchmark": "--version",
    "regtrack-openloop": "--version",
    "redis-server": "--version",
    "taskset": "--version",
    "setpriv": "--version",
    "git": "--version",
    "make": "--version",
    "cc": "--version",
    "valgrind": "--version",
}


@dataclass(frozen=True)
class Tool:
    """A tool found on this machine (path None: not installed) and its first line of
    --version."""

    path: str | None
    version: str = ""

    def __str__(self) -> str:
        return self.version or self.path or "not installed"


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env=child_env.basic(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return "not usable"
    return ((out.stdout or out.stderr).strip().splitlines() or ["?"])[0][:60]


def find_tools() -> dict[str, Tool]:
    """Every tool of TOOLS: where it is and its version (memtier and the open-loop engine
    also beside regtrack)."""
    found = {}
    for name, flag in TOOLS.items():
        beside = {memtier.NAME: memtier.installed, openloop.NAME: openloop.installed}.get(name)
        path = beside() if beside else shutil.which(name)
        found[name] = Tool(path, _version([path, flag]) if path else "")
    return found


def load_generator(tools: Mapping[str, Tool]) -> Check:
    """memtier_benchmark or redis-benchmark drives throughput; the built-in driver's
    throughput measures Python, not Redis."""
    have = {n: tools[n] for n in (memtier.NAME, "redis-benchmark") if tools[n].path}
    if have:
        return Check("load generator", Status.OK, "; ".join(f"{n}: {t}" for n, t in have.items()))
    can_build = all(tools[n].path for n in ("make", "cc"))
    advice = (
        "install one: apt-get install redis-tools (redis-benchmark), or scripts/install.sh "
        "(memtier_benchmark 2.3.0)"
    )
    if can_build:
        return Check(
            "load generator",
            Status.WARNING,
            "neither memtier_benchmark nor redis-benchmark is installed; a run that builds "
            "Redis uses the redis-benchmark built with its newest version",
            f"{advice}, so every run is driven by the same binary",
        )
    return Check(
        "load generator",
        Status.PROBLEM,
        "neither memtier_benchmark nor redis-benchmark is installed, and nothing can be "
        "built (no make or cc)",
        advice,
    )


def open_loop(tools: Mapping[str, Tool]) -> Check:
    """regtrack-openloop measures latency at a rate (--rate, --load, --slo, --latency-load)."""
    engine = tools[openloop.NAME]
    if engine.path:
        return Check("open-loop engine", Status.OK, str(engine))
    return Check(
        "open-loop engine",
        Status.WARNING,
        "regtrack-openloop is not installed: runs cannot measure latency at a rate "
        "(--rate, --load, --slo, ci --latency-load)",
        "scripts/install.sh builds it from engine/ (it needs cargo: rustup)",
    )


def pinning(tools: Mapping[str, Tool]) -> Check:
    """taskset pins server and load generator; setpriv ties their lives to regtrack's."""
    missing = [n for n in ("taskset", "setpriv") if not tools[n].path]
    found = "; ".join(f"{n}: {tools[n]}" for n in ("taskset", "setpriv"))
    if missing:
        return Check(
            "pinning (taskset, setpriv)",
            Status.PROBLEM,
            found,
            "apt-get install util-linux: without it nothing can be pinned to its CPUs",
        )
    return Check("pinning (taskset, setpriv)", Status.OK, found)


def build_tools(tools: Mapping[str, Tool]) -> Check:
    names = ("git", "make", "cc", "redis-server")
    found = "; ".join(f"{n}: {tools[n]}" for n in names)
    missing = [n for n in ("git", "make", "cc") if not tools[n].path]
    if missing:
        return Check(
            "build tools",
            Status.WARNING,
            found,
            f"install {', '.join(missing)} (apt-get install git make gcc) to measure versions "
            "built from source; bin: specs and --runtime docker work without",
        )
    return Check("build tools", Status.OK, found)


def valgrind(tools: Mapping[str, Tool]) -> Check:
    """callgrind counts the server's instructions: the measure noise does not move."""
    if tools["valgrind"].path:
        return Check("valgrind (callgrind)", Status.OK, str(tools["valgrind"]))
    return Check(
        "valgrind (callgrind)",
        Status.WARNING,
        "not installed: --metric instructions (and ci's default, both) cannot run",
        "apt-get install valgrind",
    )


def hash_seeds(problem: str | None) -> Check:
    """Without regtrack's seeds each server seeds its hash tables from /dev/urandom, which
    moves instructions per op by 2-4% between processes of one binary."""
    if problem is None:
        return Check(
            "hash seeds",
            Status.OK,
            "controlled: each repetition's servers read regtrack's seed bytes in place of "
            "/dev/urandom (a private mount namespace)",
        )
    return Check(
        "hash seeds",
        Status.PROBLEM,
        f"not controllable natively: {problem}",
        "run as root, or allow unprivileged user namespaces (sysctl "
        "kernel.unprivileged_userns_clone=1; on Ubuntu also "
        "kernel.apparmor_restrict_unprivileged_userns=0): otherwise each server's own "
        "random seed moves instructions per op by 2-4%, more than the changes worth finding",
    )


def seeds_problem() -> str | None:
    """Why seeds cannot be controlled natively (the probe a native run makes)."""
    return seeds.native_problem()


def docker_engine_check(clean: bool = False) -> Check:
    """The engine, regtrack's and redis images, and containers a killed run left behind
    (removed with --clean)."""
    try:
        client = docker_engine.engine()
    except RegtrackError as exc:
        return Check(
            "docker",
            Status.OK,
            f"not usable ({exc}); only --runtime docker needs it",
        )
    facts = docker.describe_engine(client)
    images = "; ".join(f"{', '.join(i.tags)} ({i.id})" for i in facts.images)
    found = f"engine {facts.version}; images: {images or 'no redis or regtrack images'}"
    leftovers = [f"{c.name} ({c.status}) of run {c.run}" for c in facts.leftovers]
    if leftovers and clean:
        removed = docker.remove_leftovers(client, all_of_them=True)
        return Check("docker", Status.OK, f"{found}; removed {', '.join(removed)}")
    if leftovers:
        return Check(
            "docker",
            Status.WARNING,
            f"{found}; left behind: {', '.join(leftovers)}",
            "regtrack doctor --clean removes them (a container left running takes CPU)",
        )
    return Check("docker", Status.OK, f"{found}; no regtrack containers left behind")
