"""Version resolution and cached builds on small real git repositories."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.targets import build, make_flags
from regtrack.targets.sources import SourceRepo
from regtrack.targets.versions import parse_specs, resolve
from tests import fakebench
from tests.conftest import cli_in_process, run_cli
from tests.fakerepo import GOOD_MAKEFILE, git, make_repo


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("REGTRACK_CACHE", str(path))
    return path


@pytest.fixture
def repo(tmp_path, redis_server):
    path = tmp_path / "src-repo"
    return path, make_repo(path)


def test_resolution_rules(repo, cache):
    path, commits = repo
    targets = resolve(
        parse_specs(f"1.0,1.0.0,unstable,c={commits['1.1.0']},s={commits['1.0.0'][:9]}"),
        str(path),
    )
    got = [(t.label, t.ref, t.commit, t.source_version) for t in targets]
    assert got == [
        ("1.0", "tag 1.0.1", commits["1.0.1"], "1.0.1"),
        ("1.0.0", "tag 1.0.0", commits["1.0.0"], "1.0.0"),
        ("unstable", "branch unstable", commits["1.2.0"], "1.2.0"),
        ("c", f"commit {commits['1.1.0']}", commits["1.1.0"], "1.1.0"),
        ("s", f"commit {commits['1.0.0'][:9]}", commits["1.0.0"], "1.0.0"),
    ]
    assert all(t.source_repo == str(path) for t in targets)
    assert (cache / "repos").is_dir(), "the repository is cloned into the cache"


def test_fetch_happens_only_when_a_spec_is_unknown_locally(repo, cache, monkeypatch):
    path, commits = repo
    first = SourceRepo(str(path))
    assert first.resolve("1.0.0").commit == commits["1.0.0"]
    fetches = []
    real_fetch = SourceRepo.fetch
    monkeypatch.setattr(SourceRepo, "fetch", lambda self: fetches.append(1) or real_fetch(self))
    again = SourceRepo(str(path))
    assert again.resolve("1.1.0").commit == commits["1.1.0"]
    assert fetches == [], "a spec found in the cached clone must not fetch"
    git(path, "tag", "1.2.0", commits["1.2.0"])
    assert again.resolve("1.2").commit == commits["1.2.0"]
    assert fetches == [1], "a new tag is found by fetching once"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("9.9.9", "unknown version '9.9.9': no such tag, branch or commit"),
        ("3.1", "no 3.1.x release tag"),
        ("deadbeef", "no such tag, branch or commit"),
        ("feature/x", "no such tag, branch or commit"),
    ],
)
def test_unknown_versions_are_bad_input(repo, cache, spec, message):
    path, _ = repo
    with pytest.raises(BadInput, match=message):
        resolve(parse_specs(spec), str(path))


def test_an_ambiguous_commit_prefix_is_bad_input(tmp_path, cache):
    """Commits enough that two share 7 hex digits (fixed dates make this deterministic)."""
    path = tmp_path / "many"
    path.mkdir()
    git(path, "init", "-q")
    stream = []
    for i in range(1, 60001):
        stream.append(
            f"commit refs/heads/b\nmark :{i}\ncommitter t <t@t> 1700000000 +0000\n"
            f"data {len(str(i))}\n{i}\n"
        )
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet"],
        input="".join(stream),
        text=True,
        check=True,
    )
    shas = git(path, "rev-list", "b").split()
    seen: dict[str, str] = {}
    prefix = None
    for sha in shas:
        if sha[:7] in seen:
            prefix = sha[:7]
            break
        seen[sha[:7]] = sha
    assert prefix, "60,000 commits should share a 7-digit prefix somewhere"
    with pytest.raises(BadInput, match="ambiguous commit prefix"):
        resolve(parse_specs(prefix), str(path))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-uexploit", "must not start with '-'"),
        ("/nonexistent/repo", "no such directory"),
        ("/tmp", "is not a git repository"),
    ],
)
def test_bad_source_repositories_are_bad_input(value, message, cache):
    with pytest.raises(BadInput, match=message):
        SourceRepo(value)


def test_second_build_of_a_commit_reuses_the_cache(repo, cache):
    path, _ = repo
    (target,) = resolve(parse_specs("1.0.0"), str(path))
    (target,) = build.obtain([target], [])
    first = target.build
    assert not first.cached and first.server_version.startswith("Redis server v=")
    (again,) = resolve(parse_specs("1.0.0"), str(path))
    (again,) = build.obtain([again], [])
    assert again.build.cached
    assert again.binary == target.binary and again.binary_sha256 == target.binary_sha256
    count = (cache / "builds").glob("*/src/build-count.txt")
    assert [p.read_text() for p in count] == ["built\n"], "make ran exactly once"


def test_build_flags_and_compiler_are_part_of_the_cache_key(repo, cache):
    path, _ = repo
    (a,) = resolve(parse_specs("1.0.0"), str(path))
    (b,) = resolve(parse_specs("1.0.0"), str(path))
    (a,) = build.obtain([a], [])
    (b,) = build.obtain([b], ["MALLOC=libc"])
    assert a.build.directory != b.build.directory
    assert b.build.flags == ("MALLOC=libc",)
    assert (
        "built libc"
        in (cache / "builds").joinpath(b.build.directory, "src", "build-count.txt").read_text()
    )
    assert a.build.compiler


def test_make_variables_from_the_environment_are_recorded_and_keyed(repo, cache, monkeypatch):
    """make reads CFLAGS and the like from the environment: such a build is another build,
    and says so (its details, the comparability key's build flags)."""
    path, _ = repo
    for name in make_flags.MAKE_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    (a,) = resolve(parse_specs("1.0.0"), str(path))
    (a,) = build.obtain([a], [])
    record = json.loads((Path(a.build.directory) / "build.json").read_text())
    assert "environment" not in record, "written as before, for an older regtrack"
    assert a.build.environment == {}

    monkeypatch.setenv("CFLAGS", "-O1")
    monkeypatch.setenv("MALLOC", "jemalloc")  # the command line's MALLOC wins over it
    (b,) = resolve(parse_specs("1.0.0"), str(path))
    (b,) = build.obtain([b], ["MALLOC=libc"])
    assert not b.build.cached, "not the build made without CFLAGS"
    assert b.build.directory != a.build.directory
    assert b.build.environment == {"CFLAGS": "-O1"}
    assert (
        make_flags.flags_text(b.build.flags, b.build.environment)
        == "MALLOC=libc (environment CFLAGS=-O1)"
    )
    (again,) = resolve(parse_specs("1.0.0"), str(path))
    (again,) = build.obtain([again], ["MALLOC=libc"])
    assert again.build.cached
    assert again.build.environment == {"CFLAGS": "-O1"}, "kept in the record"


def test_the_compiler_recorded_is_the_one_make_runs(tmp_path, monkeypatch):
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\necho 'fakecc 9.9'\necho second line\n")
    fake.chmod(0o755)
    real_which = shutil.which

    def which(ccache: str | None):
        return lambda name, *a, **k: ccache if name == "ccache" else real_which(name, *a, **k)

    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setattr(build.shutil, "which", which(None))
    assert make_flags.compiler_version([]) == "fakecc 9.9", "make takes CC from the environment"
    assert make_flags.compiler_version([f"CC={fake}"]) == "fakecc 9.9"
    # With ccache, make's command line says CC="ccache cc" (_ccache): cc it is.
    monkeypatch.setattr(build.shutil, "which", which("/usr/bin/ccache"))
    monkeypatch.delenv("CC")
    cc = make_flags.compiler_version([])
    monkeypatch.setenv("CC", str(fake))
    assert make_flags.compiler_version([]) == cc != "fakecc 9.9"
    assert make_flags.compiler_version([f"CC={fake}"]) == "fakecc 9.9"


@pytest.mark.parametrize("flags", ["rm -rf /", "MALLOC=libc; reboot", "'unterminated", "-j99"])
def test_build_flags_must_be_make_variables(flags):
    with pytest.raises(BadInput, match="--build-flags"):
        make_flags.parse_build_flags(flags)


def test_a_failing_build_raises_with_the_log_tail(tmp_path, cache, redis_server):
    path = tmp_path / "broken"
    make_repo(path, broken={"1.1.0"})
    (target,) = resolve(parse_specs("1.1.0"), str(path))
    with pytest.raises(CannotMeasure) as failure:
        (target,) = build.obtain([target], [])
    text = str(failure.value)
    assert "make exit code 2" in text
    assert "server.c:42: error: expected ';'" in text
    assert not list((cache / "builds").glob("*/build.json")), "a failed build is not cached"


def test_src_tree_is_built_in_place(tmp_path, cache, redis_server):
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "Makefile").write_text(GOOD_MAKEFILE.replace("{server}", redis_server))
    (target,) = resolve(parse_specs(f"mine=src:{tree}"))
    before = {p.relative_to(tree) for p in tree.rglob("*")}
    (target,) = build.obtain([target], [])
    assert target.binary == str(tree / "src" / "redis-server")
    added = {p.relative_to(tree) for p in tree.rglob("*")} - before
    made = {Path("src/redis-server"), Path("src/redis-benchmark"), Path("build-count.txt")}
    assert added == made, "what make wrote, and no log, in the user's tree"
    (log,) = (cache / "trees").glob("*/build.log")
    assert f"regtrack build of the tree {tree}" in log.read_text()


def test_versions_command_prints_resolution_without_building(repo, cache):
    path, commits = repo
    proc = cli_in_process(
        "versions",
        "old=1.0,unstable",
        "--source-repo",
        str(path),
        "--format",
        "json",
        env={"REGTRACK_CACHE": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["label"], r["ref"], r["commit"], r["version"]) for r in rows] == [
        ("old", "tag 1.0.1", commits["1.0.1"], "1.0.1"),
        ("unstable", "branch unstable", commits["1.2.0"], "1.2.0"),
    ]
    assert not (cache / "builds").exists()
    table = cli_in_process(
        "versions", "1.0", "--source-repo", str(path), env={"REGTRACK_CACHE": str(cache)}
    )
    assert "tag 1.0.1" in table.stdout and commits["1.0.1"][:12] in table.stdout


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ("7.0;rm -rf ~", "not a tag, branch or commit"),
        ("`id`", "not a tag, branch or commit"),
        ("9.9.9", "no such tag"),
        ("src:/nonexistent", "is not a directory"),
    ],
)
def test_versions_command_bad_specs_exit_2(repo, cache, specs, message):
    path, _ = repo
    proc = cli_in_process(
        "versions", specs, "--source-repo", str(path), env={"REGTRACK_CACHE": str(cache)}
    )
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_run_stops_before_measuring_when_a_build_fails(tmp_path, cache, redis_server):
    path = tmp_path / "broken"
    make_repo(path, broken={"1.1.0"})
    db = tmp_path / "r.db"
    proc = run_cli(
        "run",
        "--versions",
        "1.0,1.1",
        "--source-repo",
        str(path),
        "--db",
        str(db),
        env={"REGTRACK_CACHE": str(cache)},
    )
    assert proc.returncode == 3
    assert "server.c:42: error" in proc.stderr and "Traceback" not in proc.stderr
    assert not db.exists(), "nothing was measured or recorded"


def test_run_with_built_versions_records_the_build(tmp_path, repo, cache, monkeypatch):
    """Builds are real; the trials are modelled (tests/fakebench.py)."""
    model = fakebench.Model()
    path, commits = repo
    db = tmp_path / "r.db"
    args = ["run", "--versions", "1.0,unstable", "--source-repo", str(path), "--db", str(db),
            "--pipelines", "10", "--repetitions", "1", "--duration", "0.5", "--warmup", "0.2",
            "--keys", "1000"]  # fmt: skip
    first = cli_in_process(*args, env={"REGTRACK_CACHE": str(cache)}, measuring=model)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("built in") == 2
    second = cli_in_process(*args, env={"REGTRACK_CACHE": str(cache)}, measuring=model)
    assert second.returncode == 0, second.stderr
    assert second.stderr.count("cached build") == 2 and "built in" not in second.stderr
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT label, commit_sha, ref, details FROM targets WHERE run_id = 2 ORDER BY position"
        )
        .fetchall()
    )
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("1.0", commits["1.0.1"], "tag 1.0.1"),
        ("unstable", commits["1.2.0"], "branch unstable"),
    ]
    details = json.loads(rows[0][3])
    assert details["build"]["cached"] is True and details["build"]["log"].endswith("build.log")
