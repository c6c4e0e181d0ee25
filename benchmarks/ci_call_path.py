"""How many of regtrack's modules one `ci` decision passes through (issue 30).

A `regtrack ci` of two versions is run in process on modelled trials (tests/fakebench.py:
no server is started, preflight's included, and trials come from the model); its database
is then decided on again by `regtrack ci --merge` (a decision on a stored database: no
measuring). Both are traced with ``sys.setprofile`` after a warm-up of each: every regtrack
module with a function called between the command's entry and its exit code is counted, by
package. Starting servers (bench.servers, the native runtime) is below the model, so it is
not on the counted path. Fewer modules on that path means a decision a reader can follow;
the count is what issue 30 asks to bring down.

``--stored DB`` traces only ``ci --merge`` of a database a real ``regtrack ci`` stored,
through ``regtrack.cli.main``, and nothing of tests/: so the same count can be taken of an
older commit's code (``PYTHONPATH=<its checkout>``), before tests/fakebench.py existed.

    .venv/bin/python benchmarks/ci_call_path.py [--modules] [--functions] [--stored DB]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import regtrack

ROOT = Path(__file__).resolve().parent.parent
# The regtrack imported (an older checkout's with PYTHONPATH), whose modules are counted.
PACKAGE = Path(regtrack.__file__).resolve().parent


def _ci(tmp: Path, server: str, model: object) -> int:
    from tests.conftest import cli_in_process

    proc = cli_in_process(
        "ci", "--baseline-version", f"a=bin:{server}", "--candidate-version", f"b=bin:{server}",
        "--metric", "both", "--pipelines", "10", "--db", str(tmp / "r.db"), "--no-report",
        measuring=model,
    )  # fmt: skip
    return proc.returncode


def _decide(tmp: Path) -> int:
    from tests.conftest import cli_in_process

    merged = tmp / "merged.db"
    merged.unlink(missing_ok=True)
    args = ["ci", "--merge", "--no-report", "--db", str(merged), str(tmp / "r.db")]
    return cli_in_process(*args).returncode


def _decide_stored(db: Path, tmp: Path) -> int:
    """``ci --merge`` of ``db`` into a new database, as the command line runs it."""
    from regtrack.cli import main

    merged = tmp / "merged.db"
    merged.unlink(missing_ok=True)
    try:
        main(["ci", "--merge", "--no-report", "--db", str(merged), str(db)])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def traced(command: Callable[[], int]) -> dict[str, set[str]]:
    """The regtrack modules whose functions ``command`` called, each with those functions."""
    seen: dict[str, set[str]] = defaultdict(set)

    def profile(frame, event, _arg) -> None:
        if event == "call":
            seen[frame.f_code.co_filename].add(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        code = command()
    finally:
        sys.setprofile(None)
    if code not in (0, 1, 3):  # 3: decided that nothing could be decided (no valid trials)
        raise SystemExit(f"ci exited {code}")
    root = str(PACKAGE) + "/"
    return {
        f[len(root) :].removesuffix(".py").replace("/", "."): names
        for f, names in seen.items()
        if f.startswith(root)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", action="store_true", help="list the modules")
    parser.add_argument(
        "--functions", action="store_true", help="list each module's functions called"
    )
    parser.add_argument("--stored", type=Path, help="trace ci --merge of this database only")
    args = parser.parse_args()
    if args.stored:
        with tempfile.TemporaryDirectory() as tmp:
            _decide_stored(args.stored.resolve(), Path(tmp))  # imports and caches warmed
            stored = traced(lambda: _decide_stored(args.stored.resolve(), Path(tmp)))
        paths = {f"ci --merge of {args.stored.name}, deciding on the stored database": stored}
    else:
        paths = _modelled()
    for title, modules in paths.items():
        by_package: dict[str, list[str]] = defaultdict(list)
        for module in sorted(modules):
            by_package[module.split(".")[0]].append(module)
        print(f"{title}: functions called in {len(modules)} regtrack modules")
        for package, names in sorted(by_package.items()):
            listed = f"  {', '.join(names)}" if args.modules else ""
            print(f"  {package}: {len(names)}{listed}")
            for name in names if args.functions else ():
                print(f"    {name}: {', '.join(sorted(modules[name]))}")


def _modelled() -> dict[str, dict[str, set[str]]]:
    """Both paths on modelled trials (tests/fakebench.py): ci measuring, then ci --merge."""
    sys.path.insert(0, str(ROOT))  # after regtrack is imported: tests/ only
    import pytest

    from tests import fakebench

    server = shutil.which("redis-server")
    if not server:
        raise SystemExit("redis-server is not installed")
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        root = Path(tmp)
        (root / "regtrack.toml").write_text("[run]\nseed_offset = 0\n")
        patch.setenv("REGTRACK_CONFIG_DIR", str(root))
        model = fakebench.Model(instructions={"a": 3500.0, "b": 3570.0})
        _ci(root, server, model)  # imports and caches warmed
        _decide(root)
        (root / "r.db").unlink()
        return {
            "ci, measuring modelled trials": traced(lambda: _ci(root, server, model)),
            "ci --merge, deciding on the stored database": traced(lambda: _decide(root)),
        }


if __name__ == "__main__":
    main()
