"""`regtrack --version` and every `--help` start at once (shell completion runs them too):
they import no analysis, report or measuring library; a command imports those when it runs.
Their wall time is measured by benchmarks/startup.py."""

from __future__ import annotations

import json
import subprocess
import sys

# What costs start-up time and is needed only once a command runs (compiled: pandas 0.3 s,
# scipy 0.2-0.6 s, ruptures 0.5 s; redis, docker, jinja2, plotly 0.05-0.2 s each).
HEAVY = ("scipy", "pandas", "numpy", "plotly", "ruptures", "docker", "jinja2", "redis")
COMMANDS = [
    ["--version"], ["--help"], ["run", "--help"], ["ci", "--help"], ["bisect", "--help"],
    ["compare", "--help"], ["report", "--help"], ["versions", "--help"], ["explain", "--help"],
    ["history", "--help"], ["doctor", "--help"], ["merge", "--help"], ["mix", "capture", "--help"],
    ["baseline", "save", "--help"], ["baseline", "list", "--help"],
    ["sources", "offline", "--help"],
]  # fmt: skip

# Runs the commands of argv[1] (JSON) in a fresh interpreter, after importing the modules
# of argv[2:] (none but for the check that the guard can fail), and lists what was imported.
PROBE = """
import contextlib, importlib, io, json, sys
from regtrack.cli import main
for name in sys.argv[2:]:
    importlib.import_module(name)
codes = []
for args in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(args)
        except SystemExit as exc:
            codes.append([args, exc.code, len(out.getvalue())])
print(json.dumps({"codes": codes, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def _probe(commands: list[list[str]], *modules: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(commands), *modules],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_version_and_every_help_import_no_heavy_library():
    seen = _probe(COMMANDS)
    assert [c[1] for c in seen["codes"]] == [0] * len(COMMANDS), seen["codes"]
    assert all(size > 0 for *_, size in seen["codes"]), "every one printed something"
    assert not set(HEAVY) & set(seen["modules"]), sorted(set(HEAVY) & set(seen["modules"]))


def test_the_probe_sees_a_heavy_import():
    """The guard above can fail: what a command imports when it runs is seen."""
    seen = _probe([["--version"]], "regtrack.analysis.comparison")
    assert {"pandas", "scipy", "numpy"} <= set(seen["modules"])
