#!/usr/bin/env python3
"""Do databases written by older releases' code still open, report and compare the same?

For each release commit: a detached `git worktree` of it in a temp dir; with THAT code
(PYTHONPATH=<checkout>) a database with short real runs of two versions from an offline
source repository:

- a GET sweep with `--metric both` (throughput and callgrind instructions);
- the streams-queue mix;
- the celery lifecycle, where the release has lifecycle workloads.

Then, on two copies of that database, the release's code and this checkout's code (the
one this script lives in: "main") each run `compare --list`, `compare --run N` as a table
and as JSON for every run, `compare --run 2 --baseline-run 1 --force`, `explain` of the
instruction run, `history` (by commit, and by run as JSON) and `report --out DIR`. Their
stdout, stderr, exit codes and report files are diffed once the copy's directory is
written <SIDE>. Prints per release and command `identical` or the differing lines.
Before measuring it checks that each side imports regtrack from its own checkout, and
prints how many lines of `compare --help` differ between the two codes (a control: a
release older than main's options shows its missing ones there).

Default releases, the last three that landed on main (`issues stops`, `git log
--first-parent`):

- f94c305, stop 53: its note's last `.ci/run` is "of a fresh clone of f94c305", the
  first-parent commit before stop 54's work (04f205b...).
- 4131b8d, stop 54: "`.ci/run` on a fresh clone of the final main, 4131b8d".
- a89ffaa, stop 55: main's HEAD when this script was written ("a fresh clone of a89ffaa").

Stop 52 ran this check by hand on 1ba44cc, 0cadb8b and 1aac722; any commits can be given
instead (`benchmarks/old_databases.py 1aac722 f94c305`). Schema changes would show here:
main's code migrates its copy of the database on first open (results/migrations.py), the
release's copy stays as written; each release's section says the schema versions.

The measuring runs hold --lock (the tests' lock) one release at a time, so others can
interleave; run it without an outer flock:

    .venv/bin/python benchmarks/old_databases.py > benchmarks/results/old_databases.txt

Exit status: 1 when a command failed under main's code (or a release's run failed), else 0,
differences or not (each is for a reader to explain: benchmarks/results/old_databases.txt).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAIN = Path(__file__).resolve().parent.parent
RELEASES = ("f94c305", "4131b8d", "a89ffaa")
SOURCE_REPO = Path.home() / ".cache/regtrack/offline-redis"
ARCHIVES = Path("/work/shared/sources")
LOCK = "/tmp/regtrack-tests.lock"
SHORT = ["--duration", "1", "--warmup", "0.5", "--repetitions", "2", "--no-report"]


@dataclass(frozen=True)
class Output:
    code: int
    stdout: str
    stderr: str


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, **kw)


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold the tests' lock (nothing when ``path`` is empty)."""
    if not path:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def checkout(commit: str, parent: Path) -> Iterator[Path]:
    """A detached worktree of ``commit`` under ``parent``, removed afterwards."""
    where = parent / f"code-{commit}"
    sh(["git", "-C", str(MAIN), "worktree", "add", "--detach", str(where), commit], check=True)
    try:
        yield where
    finally:
        sh(["git", "-C", str(MAIN), "worktree", "remove", "--force", str(where)])


class Regtrack:
    """`python -m regtrack` with one checkout's code, config isolated from the user's."""

    def __init__(self, code: Path, python: str, home: Path):
        self.code = code
        self.env = {
            **os.environ,
            "PYTHONPATH": str(code),
            "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "XDG_CONFIG_HOME": str(home),
            "COLUMNS": "200",
        }
        for name in ("REGTRACK_DB", "REGTRACK_CONFIG_DIR", "REGTRACK_SOURCE_REPO"):
            self.env.pop(name, None)
        self.python = python

    def __call__(self, argv: list[str], cwd: Path) -> Output:
        done = sh([self.python, "-m", "regtrack", *argv], cwd=cwd, env=self.env)
        return Output(done.returncode, done.stdout, done.stderr)

    def imported(self, cwd: Path) -> Path:
        """The regtrack package this environment imports; a RuntimeError unless its own."""
        done = sh(
            [self.python, "-c", "import regtrack; print(regtrack.__file__)"], cwd=cwd, env=self.env
        )
        where = Path(done.stdout.strip()).parent
        if where != self.code / "regtrack":
            raise RuntimeError(f"{self.code}'s code is not what runs: regtrack from {where}")
        return where


def has_lifecycles(code: Path) -> bool:
    celery = code / "configs/workloads/celery.toml"
    return celery.exists() and 'kind = "lifecycle"' in celery.read_text()


def measure(rt: Regtrack, db: Path, args: argparse.Namespace) -> list[str]:
    """Write ``db`` with the release's code; the runs' names, in run-id order."""
    common = ["--versions", args.versions, "--source-repo", str(args.source_repo)]
    common += [*SHORT, "--db", str(db)]
    runs = {
        "get-pipeline --metric both": [
            *("--workload", "get-pipeline", "--pipelines", "1,10", "--metric", "both"),
            *("--instruction-requests", str(args.instruction_requests)),
        ],
        "streams-queue": ["--workload", "streams-queue", "--pipelines", "1"],
    }
    if has_lifecycles(rt.code):
        runs["celery (lifecycle)"] = ["--workload", "celery"]
    for number, (name, argv) in enumerate(runs.items(), 1):
        started = time.monotonic()
        out = rt(["run", *argv, *common], cwd=db.parent)
        took = time.monotonic() - started
        if out.code != 0:
            tail = (out.stdout + out.stderr).strip().splitlines()[-15:]
            raise RuntimeError(f"run {name} failed (exit {out.code}):\n" + "\n".join(tail))
        print(f"   wrote run {number}: {name} ({took:.0f} s)", flush=True)
    return list(runs)


def commands(runs: list[str], versions: list[str]) -> list[list[str]]:
    """What both codes run on their copies (``--db`` added by the caller)."""
    base, candidate = versions[0], versions[1]
    out = [["compare", "--list"]]
    for run in range(1, len(runs) + 1):
        out += [["compare", "--run", str(run)], ["compare", "--run", str(run), "--format", "json"]]
    out += [
        ["compare", "--run", "2", "--baseline-run", "1", "--force"],
        ["explain", "--run", "1", "--baseline", base, "--candidate", candidate, "--top", "5"],
        ["history"],
        ["history", "--by", "run", "--show", "throughput", "--format", "json"],
        ["report", "--out", "report"],
    ]
    return out


def on_copy(rt: Regtrack, db: Path, side: Path, todo: list[list[str]]) -> dict[str, Output]:
    """Run ``todo`` with ``rt`` on a copy of ``db`` in ``side``; paths written <SIDE>."""
    side.mkdir()
    copy = side / db.name
    shutil.copy(db, copy)
    said = {}
    for argv in todo:
        out = rt([*argv, "--db", str(copy)], cwd=side)
        said[" ".join(argv)] = Output(
            out.code,
            out.stdout.replace(str(side), "<SIDE>"),
            out.stderr.replace(str(side), "<SIDE>"),
        )
    return said


def schema(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def report_files(side: Path) -> dict[str, str]:
    root = side / "report"
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
    return {
        str(p.relative_to(root)): p.read_text(errors="replace").replace(str(side), "<SIDE>")
        for p in files
    }


def differing(old: str, new: str, limit: int, width: int, context: int = 0) -> list[str]:
    """The unified diff's lines (release's `-`, main's `+`, ``context`` lines around them),
    each cut to ``width``; a blank or whitespace-only line shown as its repr."""
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context)
    lines = [line for line in diff if not line.startswith(("---", "+++"))]
    cut = [
        f"{line[:width]}... ({len(line)} chars)"
        if len(line) > width
        else line[0] + repr(line[1:])
        if line[1:].strip() == "" and not line.startswith("@@")
        else line
        for line in lines
    ]
    if len(cut) > limit:
        cut = [*cut[:limit], f"... {len(cut) - limit} more diff lines"]
    return cut


def compare_release(commit: str, args: argparse.Namespace, tmp: Path, main_rt: Regtrack) -> bool:
    """Print one release's findings; False when a command failed under main's code."""
    work = tmp / commit
    work.mkdir()
    versions = args.versions.split(",")
    with checkout(commit, tmp) as code:
        full = sh(["git", "-C", str(code), "log", "-1", "--format=%h %ad %s", "--date=short"])
        print(f"== release {full.stdout.strip()[:110]}", flush=True)
        rt = Regtrack(code, args.python, tmp / "config")
        rt.imported(work)
        helps = [r(["compare", "--help"], cwd=work).stdout for r in (rt, main_rt)]
        moved = sum(line[0] in "+-" for line in differing(*helps, limit=10**6, width=9))
        print(f"   each code's own (control: `compare --help` differs in {moved} lines)")
        db = work / "regtrack.db"
        with locked(args.lock):
            runs = measure(rt, db, args)
        todo = commands(runs, versions)
        old = on_copy(rt, db, work / "release", todo)
        new = on_copy(main_rt, db, work / "main", todo)
    written, old_v, new_v = (schema(d / db.name) for d in (work, work / "release", work / "main"))
    print(f"   schema: {written} as written; after the commands {old_v} (release), {new_v} (main)")
    ok = True
    same = 0
    for name, was in old.items():
        now = new[name]
        if now.code != 0:
            ok = False
        if was == now:
            same += 1
            print(f"   {name}: identical (exit {now.code}, {len(now.stdout.splitlines())} lines)")
            continue
        print(f"   {name}: DIFFERS (exit {was.code} -> {now.code})")
        for what in ("stdout", "stderr"):
            lines = differing(getattr(was, what), getattr(now, what), args.max_lines, args.width, 2)
            if lines:
                print(f"     {what}:")
                print("\n".join(f"       {line}" for line in lines))
    print(f"   commands: {same} of {len(old)} identical")
    files_old, files_new = report_files(work / "release"), report_files(work / "main")
    names = sorted(set(files_old) | set(files_new))
    changed = [n for n in names if files_old.get(n) != files_new.get(n)]
    print(f"   report: {len(files_new)} files (release: {len(files_old)}), {len(changed)} differ")
    for name in changed:
        if name not in files_old or name not in files_new:
            print(f"     {name}: only under {'main' if name in files_new else 'the release'}")
            continue
        print(f"     {name}:")
        lines = differing(files_old[name], files_new[name], args.max_lines, args.width, 2)
        print("\n".join(f"       {line}" for line in lines))
    if not args.keep:
        shutil.rmtree(work)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", default=list(RELEASES), help="release commits")
    parser.add_argument("--versions", default="7.0.15,6.2.14", help="two Redis versions")
    parser.add_argument("--source-repo", type=Path, default=SOURCE_REPO)
    parser.add_argument("--instruction-requests", type=int, default=20000)
    parser.add_argument("--python", default=str(MAIN / ".venv/bin/python"))
    parser.add_argument("--lock", default=LOCK, help="held while measuring ('': none)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--max-lines", type=int, default=40, help="diff lines per output")
    parser.add_argument("--width", type=int, default=240, help="characters per diff line")
    args = parser.parse_args()
    if not Path(args.python).exists():
        args.python = sys.executable
    if not (args.source_repo / ".git").exists() and not (args.source_repo / "HEAD").exists():
        offline = ["sources", "offline", "redis", str(args.source_repo)]
        offline += ["--archives", str(ARCHIVES)]
        made = sh(
            [args.python, "-m", "regtrack", *offline],
            env={**os.environ, "PYTHONPATH": str(MAIN)},
        )
        if made.returncode:
            sys.exit(f"could not make the offline source repo: {made.stderr.strip()}")
    head = sh(["git", "-C", str(MAIN), "log", "-1", "--format=%h %s"]).stdout.strip()
    dirty = sh(["git", "-C", str(MAIN), "status", "--porcelain", "--untracked-files=no"]).stdout
    print(f"main's code: {MAIN} at {head[:100]}{' (uncommitted changes)' if dirty else ''}")
    print(f"versions {args.versions}; runs: {' '.join(SHORT)}\n")
    ok = True
    tmp = Path(tempfile.mkdtemp(prefix="old-databases-"))
    try:
        main_rt = Regtrack(MAIN, args.python, tmp / "config")
        main_rt.imported(tmp)
        for commit in args.releases:
            try:
                ok &= compare_release(commit, args, tmp, main_rt)
            except (RuntimeError, subprocess.CalledProcessError) as exc:
                print(f"   FAILED under the release's code: {exc}")
                ok = False
            print()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
