#!/usr/bin/env python3
"""Kept for scripts written before the command existed: the same as

    regtrack sources offline PRODUCT DIR [--work WORKDIR] [--archives DIR] [--force] [--bare]

which an installed regtrack (pipx, a wheel) has too; its logic is regtrack.targets.offline.
Runs this source tree's regtrack (found next to the script: no install needed, but its
dependencies must be importable, as in scripts/install.sh's .venv).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regtrack.cli import main

if __name__ == "__main__":
    main(["sources", "offline", *sys.argv[1:]])
