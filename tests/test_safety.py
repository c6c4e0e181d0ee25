"""regtrack as root on a shared machine and in other people's CI: nothing it writes can be
turned against it (planted lock files, stored commits read as options), no credential is
stored or shown, no setting is taken from the working directory, a machine's passing
trouble is not remembered as a commit that does not build, and a bug says it is one."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from regtrack.bench import loadgen
from regtrack.bench.loadgen.base import Aim
from regtrack.bench.runtimes.native import native_server
from regtrack.core import cpulock, interrupts, redact
from regtrack.core.cpus import Topology
from regtrack.core.errors import BadInput, CannotMeasure, Interrupted
from regtrack.core.records import LoadSpec
from regtrack.targets import build, commit_order
from regtrack.targets.sources import SourceRepo
from tests import fakebench, fakerepo
from tests.conftest import SHORT_RUN, cli_in_process

SECRET = "s3cr3t-t0ken"


# --- CPU locks on shared ground -------------------------------------------------------------


@pytest.fixture
def lock_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "locks"
    monkeypatch.setenv("REGTRACK_LOCK_DIR", str(folder))
    return folder


def _take(cpus: list[int]) -> None:
    with cpulock.hold(cpus):
        pass


def test_a_planted_lock_file_link_is_refused_and_its_target_untouched(lock_dir, tmp_path):
    """Another user links cpu-0.lock to a file root can write: regtrack used to follow it,
    truncate the target and write its command line there."""
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0\n")
    lock_dir.mkdir(mode=0o1777)
    os.chmod(lock_dir, 0o1777)
    (lock_dir / "cpu-0.lock").symlink_to(victim)
    with pytest.raises(CannotMeasure, match=r"holds cpu-0\.lock as a symbolic link"):
        _take([0])
    assert victim.read_text() == "root:x:0:0\n"
    (lock_dir / "cpu-0.lock").unlink()
    os.link(victim, lock_dir / "cpu-0.lock")  # a hard link: the same file, twice linked
    with pytest.raises(CannotMeasure, match="other than a plain lock file"), cpulock.hold([0]):
        pass
    assert victim.read_text() == "root:x:0:0\n"


def test_a_lock_directory_another_user_made_is_refused(lock_dir):
    lock_dir.mkdir()
    os.chown(lock_dir, 54321, 54321)
    with pytest.raises(CannotMeasure, match="belongs to user id 54321"), cpulock.hold([0]):
        pass
    os.chown(lock_dir, 0, 0)
    os.chmod(lock_dir, 0o777)  # anyone may swap its files
    with pytest.raises(CannotMeasure, match="writable by everyone without the sticky bit"):
        _take([0])


def test_lock_files_hold_a_pid_only_and_smt_siblings_are_held_too(lock_dir, monkeypatch):
    """The command line (which may hold a token) is never written; a CPU's SMT sibling
    is held with it (it shares the core); the process's own locks are not taken twice
    (a build inside a run would otherwise wait for itself)."""
    four = Topology(usable=(0, 1, 2, 3), core_of={0: "0,2", 2: "0,2", 1: "1,3", 3: "1,3"})
    monkeypatch.setattr(Topology, "detect", classmethod(lambda cls: four))
    monkeypatch.setattr("sys.argv", ["regtrack", "run", "--source-repo", f"https://{SECRET}@h/r"])
    with cpulock.hold([0]):
        assert sorted(p.name for p in lock_dir.iterdir()) == ["cpu-0.lock", "cpu-2.lock"]
        assert (lock_dir / "cpu-0.lock").read_text() == f"pid {os.getpid()}\n"
        assert oct(lock_dir.stat().st_mode & 0o7777) == "0o1777"
        assert (lock_dir / "cpu-0.lock").stat().st_mode & 0o022 == 0, "no one else writes it"
        with cpulock.hold([0, 1]):  # 0 and 2 are ours already; 1 and 3 are taken
            assert (lock_dir / "cpu-3.lock").read_text() == f"pid {os.getpid()}\n"
        assert (lock_dir / "cpu-3.lock").read_text() == ""
    assert all(SECRET not in p.read_text() for p in lock_dir.iterdir())


# --- stored text never becomes an option --------------------------------------------------


def test_a_stored_commit_is_never_given_to_git_as_an_option(tmp_path, monkeypatch):
    """A crafted shard merged into a database can hold any text as a commit; history used
    to pass it to `git rev-list`, where "--output=FILE" truncates FILE."""
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    commits = fakerepo.make_repo(tmp_path / "repo")
    repo = SourceRepo(str(tmp_path / "repo"))
    repo.ensure_clone()
    victim = tmp_path / "victim"
    victim.write_text("kept")
    crafted = f"--output={victim}"
    dates = {commits["1.0.0"]: "2024-01-01", crafted: "2024-01-02"}
    ordered = commit_order.topological(str(tmp_path / "repo"), [crafted, commits["1.0.0"]], dates)
    assert victim.read_text() == "kept"
    assert ordered == [commits["1.0.0"], crafted]
    with pytest.raises(BadInput, match="not a full commit id"):
        repo.describe(crafted)
    assert victim.read_text() == "kept"


# --- credentials ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (f"https://user:{SECRET}@git.example/r.git", "https://user:***@git.example/r.git"),
        (f"https://{SECRET}@git.example/r.git", "https://***@git.example/r.git"),
        (f"https://git.example/r.git?token={SECRET}", "https://git.example/r.git?***"),
        ("git@git.example:org/r.git", "git@git.example:org/r.git"),
        ("/srv/repos/redis", "/srv/repos/redis"),
    ],
)
def test_a_source_repository_is_stored_and_shown_without_its_credentials(given, shown):
    assert redact.location(given) == shown
    assert SECRET not in redact.scrub(f"fatal: could not read from {given}: 403")


def test_a_source_repositorys_token_is_in_no_file_output_or_cache_name(
    tmp_path, monkeypatch, redis_server
):
    """`--source-repo https://user:TOKEN@host/...`: the token used to land in the run's
    stored command line and targets, the HTML page, the lock file, the cache folder's
    name and the mirror's config. The mirror here is made where regtrack would clone it
    (a clone of a local repository: no network)."""
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("REGTRACK_LOCK_DIR", str(tmp_path / "locks"))
    fakerepo.make_repo(tmp_path / "origin")
    url = f"https://ci:{SECRET}@git.example.invalid/redis.git"
    mirror = SourceRepo(url).path
    mirror.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--quiet", "--mirror", str(tmp_path / "origin"), str(mirror)],
                   check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(mirror), "remote", "set-url", "origin", redact.url(url)],
                   check=True)  # fmt: skip
    model = fakebench.Model()
    db = tmp_path / "r.db"
    proc = cli_in_process(
        "run", "--versions", "old=1.0.0,new=1.1.0", "--source-repo", url, "--pipelines", "10",
        "--repetitions", "2", "--db", str(db), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr and "Report:" in proc.stdout
    dump = "\n".join(sqlite3.connect(db).iterdump())
    assert "ci:***@git.example.invalid" in dump and SECRET not in dump
    for path in [*tmp_path.rglob("*")]:
        assert SECRET not in path.name, path
        if path.is_file() and path.suffix in (".html", ".json", ".log", ".lock", ".txt", ""):
            assert SECRET not in path.read_text(errors="replace"), path
    unknown = cli_in_process("run", "--versions", "9.9.9", "--source-repo", url,
                             "--db", str(db), measuring=model)  # fmt: skip
    assert unknown.returncode in (2, 3) and SECRET not in unknown.stderr  # 3: no network
    assert "ci:***@git.example.invalid" in unknown.stderr


# --- a benchmark server is regtrack's to administer ----------------------------------------


def _as_nobody(*argv: str) -> subprocess.CompletedProcess:
    """``argv`` as an unprivileged second user of this machine (nobody:nogroup)."""
    if os.getuid() != 0:
        pytest.skip("becoming another user needs root")
    setpriv = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    return subprocess.run([*setpriv, *argv], capture_output=True, text=True, timeout=30)


def test_a_second_user_cannot_administer_a_benchmark_server_nor_find_its_password(
    redis_server, tmp_path
):
    """Any local user reaches 127.0.0.1. As `default` they may load the server (what the
    load generators do) but not CONFIG SET (on 6.x: CONFIG SET dir plus a write is code
    execution as root). regtrack's own password is in no command line (only its hash,
    which does not log in), and the server's folder is closed to them."""
    with native_server(redis_server, (0,), seed="00" * 8, data_dir=str(tmp_path)) as server:
        port, password = str(server.port), server.access.password
        assert password and server.access.level == "acl"
        cli = ["redis-cli", "-p", port]
        assert _as_nobody(*cli, "SET", "k", "v").stdout.strip() == "OK"
        refused = _as_nobody(*cli, "CONFIG", "SET", "dir", "/tmp")
        assert "NOPERM" in refused.stdout + refused.stderr, refused
        assert server.client().config_get("dir")["dir"] == server.token_dir
        for command in (["SHUTDOWN", "NOSAVE"], ["REPLICAOF", "NO", "ONE"], ["ACL", "LIST"]):
            answer = _as_nobody(*cli, *command)
            assert "NOPERM" in answer.stdout + answer.stderr, (command, answer)
        # The server's command line (readable by all until Redis retitles itself) has
        # the password's SHA-256, never the password; the hash does not log in.
        cmdline = _as_nobody("cat", f"/proc/{server.pid}/cmdline").stdout
        assert cmdline and password not in cmdline
        digest = hashlib.sha256(password.encode()).hexdigest()
        assert f"#{digest}" in server.access.server_args()
        login = _as_nobody(*cli, "--user", "regtrack", "--pass", digest, "CONFIG", "SET", "hz", "5")
        assert "WRONGPASS" in login.stdout + login.stderr or "NOAUTH" in login.stdout, login
        listing = _as_nobody("ls", server.token_dir)
        assert listing.returncode != 0 and "Permission denied" in listing.stderr
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert password.encode() not in path.read_bytes(), path
        assert server.alive()


def _older_redis(tmp_path: Path, redis_server: str, refuses: str, says: str) -> str:
    """redis-server as an older Redis would start: refusing ``refuses`` among its
    arguments with the line its version prints (Redis 6.0 knows no ``&*``, 5.0 no
    ``user``). Nothing here runs such a version, so a script plays its start-up."""
    script = tmp_path / f"redis-server-{refuses.strip('-&*') or 'channels'}"
    script.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do [ "$a" = "{refuses}" ] && echo "{says}" && exit 1; done\n'
        f'exec {redis_server} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    ("refuses", "says", "level"),
    [
        ("&*", "Error in user declaration '&*': Syntax error", "acl-no-channels"),
        ("--user", "Bad directive or wrong number of arguments", "open"),
    ],
)
def test_an_older_redis_starts_with_the_rules_it_knows(
    redis_server, tmp_path, refuses, says, level
):
    binary = _older_redis(tmp_path, redis_server, refuses, says)
    with native_server(binary, (0,)) as server:
        assert server.access.level == level
        assert server.server_identity()["access"] == level
        assert server.client().ping()
        anyone = _as_nobody("redis-cli", "-p", str(server.port), "CONFIG", "SET", "hz", "5")
        assert ("NOPERM" in anyone.stdout) == (level != "open"), anyone
    if level == "open":  # a run says so, once, before it measures
        proc = cli_in_process(
            "run", "--versions", f"old=bin:{binary}", *SHORT_RUN, "--pipelines", "1",
            "--repetitions", "1", "--db", str(tmp_path / "r.db"), "--no-report",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("old (Redis 7.0.15) knows no ACL users") == 1, proc.stderr


# --- settings come from where they are named ------------------------------------------------


def test_settings_in_the_working_directory_are_ignored_unless_named(
    tmp_path, monkeypatch, redis_server
):
    """In CI the working directory is the pull request's checkout: its configs/ could
    raise its own thresholds or redefine the workload. Read only when named (--config),
    and the run records the settings file it used."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "regtrack.toml").write_text("[run]\nrepetitions = 5\n")
    monkeypatch.delenv("REGTRACK_CONFIG_DIR", raising=False)
    model = fakebench.Model()
    db = tmp_path / "r.db"
    common = ["--versions", f"a=bin:{redis_server}", "--pipelines", "10", "--no-report",
              "--db", str(db)]  # fmt: skip
    plain = cli_in_process("run", *common, cwd=tmp_path, measuring=model)
    named = cli_in_process(
        "--config", str(tmp_path / "configs"), "run", *common, cwd=tmp_path, measuring=model
    )
    assert plain.returncode == 0 and named.returncode == 0, plain.stderr + named.stderr
    rows = sqlite3.connect(db).execute("SELECT config FROM runs ORDER BY id").fetchall()
    configs = [json.loads(r[0]) for r in rows]
    assert [c["settings"]["repetitions"] for c in configs] == [3, 5]
    assert configs[0]["settings_file"] == "built-in"
    assert configs[1]["settings_file"] == str((tmp_path / "configs" / "regtrack.toml").resolve())


# --- builds --------------------------------------------------------------------------------


def test_a_build_that_failed_for_a_passing_reason_is_built_again(tmp_path, monkeypatch):
    """A full disk or the OOM killer is the machine's trouble, not the commit's: it is
    not remembered (a later bisection would skip the commit forever); a compile error is."""
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("REGTRACK_LOCK_DIR", str(tmp_path / "locks"))
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    fakerepo.git(repo_dir, "init", "-q", "-b", "main")
    full = "all:\n\t@echo 'cc1: fatal error: No space left on device'\n\t@exit 2\n"
    disk = fakerepo.commit_version(repo_dir, "1.0.0", full, "")
    broken = fakerepo.commit_version(repo_dir, "1.0.1", fakerepo.BAD_MAKEFILE, "")
    repo = SourceRepo(str(repo_dir))
    repo.ensure_clone()
    for attempt in (1, 2):
        with pytest.raises(build.MakeFailed) as failed:
            build.build_commit(repo, disk, [])
        assert failed.value.passing == "No space left on device"
        assert "remembered" not in str(failed.value), f"attempt {attempt} ran make again"
    with pytest.raises(build.MakeFailed) as first:
        build.build_commit(repo, broken, [])
    assert first.value.passing is None
    with pytest.raises(build.MakeFailed, match="remembered"):
        build.build_commit(repo, broken, [])


# --- signals and bugs ----------------------------------------------------------------------


def test_a_signal_stops_load_generators_running_side_by_side_at_once(redis_server, monkeypatch):
    """A mix's client processes run from a thread pool, which the signal's exception
    never reaches: they used to run their whole trial before Ctrl-C took effect (and CI's
    SIGTERM-then-SIGKILL grace ended in a kill -9). SIGHUP stops a run like SIGTERM."""
    saved = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    monkeypatch.setattr(interrupts, "_received", None)
    binary = loadgen.locate("redis-benchmark")
    spec = LoadSpec(clients=2, threads=1, pipeline=1, data_size=3, key_min=0, key_max=9)
    try:
        interrupts.install()
        with native_server(redis_server, (0,)) as server:
            aim = Aim(binary, server.host, server.port, (1,), server.alive, server.pid)
            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGHUP)).start()
            started = time.monotonic()
            with pytest.raises(Interrupted, match="SIGHUP"):
                loadgen.run(binary, aim, [spec, spec], requests=10**9, timeout=120)
                interrupts.check()
            assert time.monotonic() - started < 10, "stopped at once, not at the trial's end"
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_bug_in_regtrack_exits_4_and_says_so_in_one_line(monkeypatch, tmp_path):
    """Unexpected exceptions used to exit 3, which reads as "could not measure"."""
    from regtrack.targets import versions

    def broken(*args, **kwargs):
        raise ZeroDivisionError(f"from https://u:{SECRET}@h/r")

    monkeypatch.setattr(versions, "resolve", broken)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    proc = cli_in_process("versions", "7.0")
    assert proc.returncode == 4
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("regtrack: internal error (a bug in regtrack")
    assert "ZeroDivisionError" in line and SECRET not in line
    (log,) = tmp_path.glob("regtrack-crash-*.log")
    assert str(log) in line and oct(log.stat().st_mode & 0o777) == "0o600"
    assert "ZeroDivisionError" in log.read_text() and SECRET not in log.read_text()


def test_a_container_is_judged_left_over_by_its_owners_token_not_its_pid_alone():
    """A pid alone could name a live regtrack in another pid namespace on the same engine
    (its containers were removed under it) or a new process that reused a dead pid."""
    from regtrack.bench.runtimes import docker

    here = docker.owner_token()
    boot, namespace, pid, started = here.split("/")
    mine = {docker.OWNER_LABEL: here}
    assert docker.owner_alive(mine, here) is True
    reused = {docker.OWNER_LABEL: f"{boot}/{namespace}/{pid}/{int(started) - 1}"}
    assert docker.owner_alive(reused, here) is False
    elsewhere = {docker.OWNER_LABEL: f"{boot}/pid:[1]/{pid}/{started}"}
    assert docker.owner_alive(elsewhere, here) is None, "not ours to judge"
    other_host = {docker.OWNER_LABEL: f"another-boot/{namespace}/{pid}/{started}"}
    assert docker.owner_alive(other_host, here) is None
    old = {docker.PID_LABEL: "999999999"}  # an older regtrack's container
    assert docker.owner_alive(old, here) is False
