"""`regtrack bisect` on real 24-commit histories made on the offline 6.2.14 tree.

Two histories (tests/histories.py edits src/t_string.c): harmless commits, one that does
not build (fixed by the next), and either one step of about +2% instructions per GET
(``one``) or two steps of about +0.7% each (``two``: a spin loop, then a longer one).
Each is bisected by a real `regtrack bisect --metric instructions` (callgrind, fixed
seeds); the script prints the answer and the number of commits measured.

    .venv/bin/python benchmarks/bisect_history.py one two [--all-steps] [--source-repo DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.histories import make_history  # noqa: E402

H = ["harmless"]
HISTORIES = {
    # 24 commits: a broken commit at 7 (fixed at 8), +2% at 15.
    "one": H * 7 + ["broken", "fix"] + H * 6 + ["spin 10"] + H * 8,
    # 24 commits: a broken commit at 4 (fixed at 5), +0.7% at 9, +0.7% more at 17.
    "two": H * 4 + ["broken", "fix"] + H * 3 + ["spin 4"] + H * 7 + ["spin 8"] + H * 6,
}
FLAGS = [
    "--metric", "instructions", "--point", "pipeline=10", "--keys", "1000",
    "--instruction-requests", "40000", "--repetitions", "2", "--build-flags", "MALLOC=libc",
    "--no-report",
]  # fmt: skip


def bisect(name: str, source: Path, work: Path, every: bool) -> None:
    kinds = HISTORIES[name]
    commits = make_history(source, work / "history", "6.2.14", f"bisect-{name}", kinds)
    guilty = [i for i, k in enumerate(kinds) if k.startswith("spin")]
    out, db = work / f"{name}.json", work / f"{name}.db"
    argv = [
        sys.executable, "-m", "regtrack", "bisect", "--good", commits[0], "--bad", commits[-1],
        "--source-repo", str(work / "history"), *FLAGS, "--json", str(out), "--db", str(db),
        *(["--all-steps"] if every else []),
    ]  # fmt: skip
    print(f"== {name}: {len(commits)} commits, spin commits at {guilty}: {' '.join(argv[2:])}")
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    print(proc.stdout.split("\nLog:")[0] if proc.returncode == 0 else proc.stderr[-3000:])
    print(f"exit {proc.returncode}, {time.monotonic() - started:.0f} s")
    if proc.returncode != 0:
        return
    result = json.loads(out.read_text())["result"]
    named = [commits.index(s["first_bad"]) for s in result["steps"]]
    kinds_found = [s["kind"] for s in result["steps"]]
    print(
        f"{name}: measured {len(result['measured_commits'])} commits (ends included); "
        f"found {list(zip(named, kinds_found, strict=True))}; the spin commits are {guilty}"
    )
    print("Log:" + proc.stdout.split("\nLog:")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("histories", nargs="+", choices=sorted(HISTORIES))
    parser.add_argument(
        "--source-repo", type=Path, default=Path.home() / ".cache/regtrack/offline-redis"
    )
    parser.add_argument("--all-steps", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="regtrack-bisect-") as tmp:
        for name in args.histories:
            bisect(name, args.source_repo, Path(tmp), args.all_steps)


if __name__ == "__main__":
    main()
