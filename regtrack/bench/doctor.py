"""`regtrack doctor`: what this machine offers for measuring, in lines a person reads."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

from regtrack.bench.loadgen import memtier
from regtrack.bench.runtimes import docker
from regtrack.core import docker_engine
from regtrack.core.cpus import Topology, plan_cpus
from regtrack.core.errors import RegtrackError


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "not usable"
    return ((out.stdout or out.stderr).strip().splitlines() or ["?"])[0][:100]


def report(clean: bool = False) -> Iterator[str]:
    topo = Topology.detect()
    yield f"CPUs: {len(topo.usable)} usable, {topo.physical_cores} physical cores"
    try:
        plan = plan_cpus(topology=topo)
        yield f"CPU plan: server on {plan.server_list}, load generator on {plan.client_list}"
    except RegtrackError as exc:
        yield f"CPU plan: impossible here ({exc})"
    tools = {
        "taskset": ["taskset", "--version"],
        "redis-server": ["redis-server", "--version"],
        "redis-benchmark": ["redis-benchmark", "--version"],
        "memtier_benchmark": ["memtier_benchmark", "--version"],
        "valgrind": ["valgrind", "--version"],
        "git": ["git", "--version"],
        "make": ["make", "--version"],
        "cc": ["cc", "--version"],
    }
    for name, command in tools.items():
        found = memtier.installed() if name == memtier.NAME else shutil.which(command[0])
        yield f"{name}: {_version([found, *command[1:]]) if found else 'not installed'}"
    try:
        client = docker_engine.engine()
    except RegtrackError as exc:
        yield f"docker: {exc}"
        return
    facts = docker.describe_engine(client)
    yield f"docker: engine {facts['version']}"
    if facts["images"]:
        for image in facts["images"]:
            yield f"  image {', '.join(image['tags'])} ({image['id']})"
    else:
        yield "  no redis or regtrack images"
    if not facts["leftovers"]:
        yield "  no regtrack containers left behind"
    for item in facts["leftovers"]:
        yield f"  LEFTOVER container {item['name']} ({item['status']}) of run {item['run']}"
    if clean and facts["leftovers"]:
        for name in docker.remove_leftovers(client, all_of_them=True):
            yield f"  removed {name}"
