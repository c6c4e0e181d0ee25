"""The machine a run happened on, recorded so a number is only compared with its peers.

The fingerprint keeps what changes throughput for reasons other than Redis (CPU model, core
layout, kernel, load generator); load and steal are recorded but not fingerprinted because
they change minute to minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

from regtrack import __version__
from regtrack.core.cpus import CpuPlan, Topology, format_cpu_list

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
