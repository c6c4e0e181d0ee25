"""Which filesystem a directory is on: where a persistent server's fsyncs land.

An AOF server's cost per write depends on the filesystem under its data directory: on a
tmpfs an fsync costs nothing, on ext4 over a virtual disk it is the point of the test. So
a run records it, and a tmpfs is labelled wherever the settings are shown.
"""

from __future__ import annotations

import os
from pathlib import Path


def _unescape(field: str) -> str:
    """/proc/mounts escapes spaces and tabs in paths as octal (\\040)."""
    return field.encode().decode("unicode_escape")


def of(path: str | Path) -> dict[str, str]:
    """{"dir", "mount", "filesystem", "device"} of the mount holding ``path``."""
    real = os.path.realpath(path)
    best = {"dir": real, "mount": "/", "filesystem": "unknown", "device": "unknown"}
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    length = -1
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        device, mount, fstype = _unescape(parts[0]), _unescape(parts[1]), parts[2]
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= length:  # the last of equal mounts is the one in effect
            length = len(mount)
            best = {"dir": real, "mount": mount, "filesystem": fstype, "device": device}
    return best
