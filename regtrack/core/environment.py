"""The machine a run happened on, recorded so a number is only compared with its peers.

The fingerprint keeps what changes throughput for reasons other than Redis (CPU model, core
layout, kernel, load generator); load and steal are recorded but not fingerprinted because
they change minute to minute.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from regtrack import __version__
from regtrack.core import child_env
from regtrack.core.cpus import CpuPlan, Topology, format_cpu_list

# ISA features shown with a run: natively (throughput) glibc picks its string functions by them.
ISA_SHOWN = ("sse4_2", "avx", "avx2", "bmi2", "erms", "fsrm", "avx512f", "avx512bw", "avx512vl")
FINGERPRINT_KEYS = ("cpu_model", "cpu_count", "physical_cores", "kernel", "loadgen_version")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _virtualization() -> str:
    text = _read("/proc/cpuinfo") or ""
    return "virtual machine" if " hypervisor" in text else "bare metal or unknown"


def _cpu_flags() -> list[str]:
    """The CPU's ISA features (/proc/cpuinfo flags): glibc picks string and memory
    functions by them (__strcasecmp_avx2 or _sse42), which moves instruction counts."""
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("flags"):
            return sorted(line.split(":", 1)[1].split())
    return []


def _valgrind() -> dict[str, str | None]:
    """valgrind's version and the hwcaps it detected, when installed. Under valgrind the
    server's CPUID is valgrind's: a fixed CPU of the host's capability level (on an AVX2
    host, an Intel i7-4910MQ whatever the host's model), so these, not the CPU model,
    decide which string functions glibc picks (benchmarks/instruction_hosts.py)."""
    return dict(_valgrind_at(shutil.which("valgrind")))


@functools.cache
def _valgrind_at(path: str | None) -> dict[str, str | None]:
    """What the valgrind at ``path`` reports, asked once a process (valgrind --tool=none
    takes ~0.3 s, and a bisection records the environment of every run it measures)."""
    if not path:
        return {"valgrind": None, "valgrind_hwcaps": None}
    try:
        out = subprocess.run(
            [path, "-v", "--tool=none", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=30,
            env=child_env.server(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"valgrind": None, "valgrind_hwcaps": None}
    version = hwcaps = None
    for line in out.stderr.splitlines():
        if "Using Valgrind-" in line:
            version = line.split("Using ", 1)[1].split()[0]
        elif "Arch and hwcaps:" in line:
            hwcaps = line.rsplit(",", 1)[-1].strip()
    return {"valgrind": version, "valgrind_hwcaps": hwcaps}


def _mem_total_kib() -> int | None:
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def capture(plan: CpuPlan, loadgen: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything about this machine that could explain a number, as plain JSON data."""
    topo = Topology.detect()
    governors = {
        cpu: _read(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor") or "n/a"
        for cpu in topo.usable
    }
    env: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": format_cpu_list(topo.usable),
        "physical_cores": topo.physical_cores,
        "smt": any(topo.smt_siblings(c) for c in topo.usable),
        "virtualization": _virtualization(),
        "governors": sorted(set(governors.values())),
        "kernel": platform.release(),
        "os": (_read("/etc/debian_version") and f"Debian {_read('/etc/debian_version')}")
        or platform.platform(),
        "mem_total_kib": _mem_total_kib(),
        "loadavg_at_start": (_read("/proc/loadavg") or "").split()[:3],
        "python": sys.version.split()[0],
        "regtrack_version": __version__,
        "cpu_flags_sha256": hashlib.sha256(" ".join(_cpu_flags()).encode()).hexdigest()[:16],
        "isa": [f for f in _cpu_flags() if f in ISA_SHOWN],
        **_valgrind(),
        "glibc": platform.libc_ver()[1] or None,
        "server_cpus": plan.server_list,
        "client_cpus": plan.client_list,
    }
    if loadgen:
        env["loadgen"] = loadgen.get("name")
        env["loadgen_version"] = loadgen.get("version")
        env["loadgen_sha256"] = loadgen.get("sha256")
    env["fingerprint"] = fingerprint(env)
    return env


def fingerprint(env: dict[str, Any]) -> str:
    """Short hash of the fields that must match before two runs' numbers are compared."""
    key = {k: env.get(k) for k in FINGERPRINT_KEYS}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def differences(stored: dict[str, Any], current: dict[str, Any]) -> str:
    """The fingerprint fields that differ, as "kernel 6.1 != 6.18", or "" if none."""
    diffs = [
        f"{key} {stored.get(key)!s} != {current.get(key)!s}"
        for key in FINGERPRINT_KEYS
        if stored.get(key) != current.get(key)
    ]
    return "; ".join(diffs)
