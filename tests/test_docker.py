"""The docker runtime against the real engine; images are made here (no registry)."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest
import redis

from regtrack.bench.runtimes import docker
from regtrack.core import filesystems
from regtrack.targets import engine_images
from tests import host_image
from tests.conftest import (
    BUILD_FLAGS,
    cli_in_process,
    decoy_server,
    labelled_containers,
    quiet_configs,
    run_cli,
    start_cli,
    wait_for_trials,
)

SHORT = ["--pipelines", "10", "--duration", "1", "--warmup", "0.3", "--keys", "2000"]


@pytest.fixture(scope="module")
def server_image(engine) -> str:
    """The installed redis-server imported into a minimal image (binary + libraries)."""
    binary = Path(shutil.which("redis-server") or "/usr/bin/redis-server")
    engine_images.import_binary(engine, binary, "test-debian")
    return f"{engine_images.IMPORTED_REPO}:test-debian"


BUILDER = "regtrack-test/builder:host"


@pytest.fixture(scope="module")
def builder_image(engine) -> str:
    """A Debian base with make and gcc, made from this machine's installed packages (no
    registry to pull one from; tests/host_image.py)."""
    if not engine_images.has_image(engine, BUILDER):
        host_image.builder_image(engine, BUILDER)
    return BUILDER


@pytest.fixture(autouse=True)
def no_containers_left():
    """Every test leaves no container behind; tests that need no engine still run."""
    yield
    left = labelled_containers(docker.RUN_LABEL)
    assert not left, f"containers left behind: {left}"


def test_the_container_is_pinned_on_the_host_network(engine, server_image):
    with docker.docker_server(engine, server_image, (0,), run_id="t", memory="256m") as server:
        status = Path(f"/proc/{server.pid}/status").read_text()
        assert "Cpus_allowed_list:\t0\n" in status
        container = engine.containers.get(server.info["container"]["id"])
        assert container.attrs["HostConfig"]["CpusetCpus"] == "0"
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
        assert container.attrs["HostConfig"]["Memory"] == 256 * 1024 * 1024
        # Hardened: an unprivileged user, no capabilities, no privilege gained by exec.
        assert container.attrs["HostConfig"]["CapDrop"] == ["ALL"]
        assert container.attrs["HostConfig"]["SecurityOpt"] == ["no-new-privileges"]
        uid = int(container.attrs["Config"]["User"].split(":")[0])
        assert uid != 0 and f"Uid:\t{uid}\t" in status
        client = server.client()
        assert client.ping() and client.config_get("bind")["bind"] == "127.0.0.1"
        assert client.config_get("save")["save"] == ""
        client.close()
        # Anyone else on the host reaches it as `default`: load, but no CONFIG SET.
        anyone = redis.Redis(port=server.port)
        assert anyone.set("k", "v") and anyone.config_get("save")
        with pytest.raises(redis.exceptions.NoPermissionError):
            anyone.config_set("dir", "/tmp")
        anyone.close()
        assert server.access.password not in " ".join(container.attrs["Args"])
        assert server.alive()
    assert not Path(f"/proc/{server.pid}").exists()


def test_two_image_targets_end_to_end(tmp_path, engine, server_image, redis_benchmark_bin):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--runtime", "docker", "--versions",
        f"a=image:{server_image},b=image:{server_image}", *SHORT, "--repetitions", "2",
        "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "% change b vs a" in proc.stdout
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT label, redis_version, details FROM targets").fetchall()
    assert [r[0] for r in rows] == ["a", "b"] and all(r[1] for r in rows)
    details = json.loads(rows[0][2])["docker"]
    assert details["image"] == server_image and details["image_id"].startswith("sha256:")
    env = json.loads(conn.execute("SELECT environment FROM runs").fetchone()[0])
    assert env["runtime"] == "docker"
    assert conn.execute("SELECT COUNT(*) FROM trials WHERE ops_per_sec > 0").fetchone()[0] == 4


def test_a_pull_that_cannot_happen_is_one_line_and_exit_3(tmp_path, engine):
    proc = run_cli(
        "run", "--runtime", "docker", "--versions", "image:redis:0.0.0-regtrack-nonexistent",
        *SHORT, "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 3
    assert proc.stderr.startswith("regtrack: error: cannot pull redis:0.0.0-regtrack-nonexistent")
    assert proc.stderr.count("\n") == 1


# Its command builds what it measures: its own time limit (run_cli's, plus a minute).
@pytest.mark.timeout(1860)
def test_a_commit_is_built_into_an_image_and_run(tmp_path, engine, offline_redis, env):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--runtime", "docker", "--versions", "7.0.15", "--source-repo",
        str(offline_redis), *SHORT, "--repetitions", "1", *BUILD_FLAGS, "--db", str(db),
        "--no-report", env=env, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    version, details = (
        sqlite3.connect(db).execute("SELECT redis_version, details FROM targets").fetchone()
    )
    details = json.loads(details)
    assert version == "7.0.15"
    assert details["docker"]["how"] == "imported from regtrack's build"
    assert details["docker"]["image"].startswith(engine_images.IMPORTED_REPO)
    assert details["build"]["commit"], "the image is of an exact commit's build"
    config = json.loads(sqlite3.connect(db).execute("SELECT config FROM runs").fetchone()[0])
    assert config["docker_images"] == "build", "a mirror's tag: regtrack's build, recorded"


# Its command builds what it measures: its own time limit (run_cli's, plus a minute).
@pytest.mark.timeout(2460)
def test_a_commit_is_built_by_docker_build_in_a_builder_image(
    tmp_path, engine, offline_redis, builder_image, env
):
    db = tmp_path / "r.db"
    args = ["run", "--runtime", "docker", "--builder-image", builder_image, "--versions",
            "7.0.15", "--source-repo", str(offline_redis), *SHORT, "--repetitions", "1",
            "--build-flags", "MALLOC=libc"]  # fmt: skip
    first = run_cli(*args, "--db", str(db), env=env, timeout=1800)
    assert first.returncode == 0, first.stderr[-2000:]
    version, details = (
        sqlite3.connect(db).execute("SELECT redis_version, details FROM targets").fetchone()
    )
    details = json.loads(details)
    assert version == "7.0.15"
    assert details["build"]["how"] == "docker build"
    assert details["build"]["builder_image"] == builder_image
    assert details["build"]["flags"] == ["MALLOC=libc"]
    image = engine.images.get(details["docker"]["image"])
    assert image.attrs["Config"]["Cmd"] == ["redis-server"]
    # The same commit, flags and builder again: the cached image, no second build.
    again = run_cli(*args, "--db", str(tmp_path / "again.db"), env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "cached build" in again.stderr


# Its command builds what it measures: its own time limit (run_cli's, plus a minute).
@pytest.mark.timeout(660)
def test_a_failing_docker_build_is_exit_3_with_its_tail(
    tmp_path, engine, server_image, offline_redis, env
):
    proc = run_cli(
        "run", "--runtime", "docker", "--builder-image", f"{engine_images.IMPORTED_REPO}:"
        "test-debian", "--versions", "7.0.15", "--source-repo", str(offline_redis), *SHORT,
        "--db", str(tmp_path / "r.db"), env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "regtrack: error: docker build of 7.0.15 in regtrack/redis:test-debian failed" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_a_server_that_cannot_start_leaves_no_container(tmp_path, engine):
    engine_images.import_binary(engine, Path("/bin/false"), "test-false")
    proc = run_cli(
        "run", "--runtime", "docker", "--versions",
        f"image:{engine_images.IMPORTED_REPO}:test-false", *SHORT,
        "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 3
    assert "exited" in proc.stderr and "Traceback" not in proc.stderr


def test_sigint_removes_the_container_and_keeps_trials(tmp_path, engine, server_image):
    db = tmp_path / "r.db"
    proc = start_cli(
        "run", "--runtime", "docker", "--versions",
        f"a=image:{server_image},b=image:{server_image}", "--pipelines", "1,5,10",
        "--duration", "1", "--warmup", "0.3", "--keys", "2000", "--repetitions", "3",
        "--db", str(db),
    )  # fmt: skip
    assert wait_for_trials(db, 2, timeout=120) >= 2
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0] == "interrupted"


def test_no_engine_is_one_line_and_exit_3(tmp_path):
    proc = cli_in_process(
        "run", "--runtime", "docker", "--versions", "bin:/usr/bin/redis-server", *SHORT,
        "--db", str(tmp_path / "r.db"), env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )  # fmt: skip
    assert proc.returncode == 3
    assert proc.stderr.startswith("regtrack: error: cannot reach the Docker engine")
    assert proc.stderr.count("\n") == 1


def test_instructions_need_the_native_runtime(tmp_path):
    proc = cli_in_process(
        "run", "--runtime", "docker", "--metric", "instructions", "--versions",
        "bin:/usr/bin/redis-server", "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--metric instructions needs --runtime native" in proc.stderr


def test_a_bad_memory_limit_is_refused_before_anything_runs(tmp_path):
    proc = cli_in_process(
        "run", "--runtime", "docker", "--memory", "lots", "--versions",
        "bin:/usr/bin/redis-server", "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == (
        "regtrack: error: --memory 'lots': give a container limit like 512m or 4g, "
        "with --runtime docker\n"
    )


def test_native_and_docker_runs_of_one_binary_are_compared_only_when_forced(
    tmp_path, engine, redis_benchmark_bin, monkeypatch
):
    """Both runtimes measure the same binary, and the runs are compared only with --force,
    which the answer names. No verdict is asserted: two runs seconds apart on a VM whose
    throughput wanders by 10-30% are not paired (once docker measured 46% more than native at
    pipeline 10, with native's load generator near its limit)."""
    # About comparability, not noise: a busy runner must not leave a side without valid trials.
    for name, value in quiet_configs(tmp_path, server_bound_cpu_pct=0).items():
        monkeypatch.setenv(name, value)
    db = tmp_path / "r.db"
    binary = shutil.which("redis-server")
    args = ["--pipelines", "10", "--duration", "1", "--warmup", "0.3", "--keys", "2000",
            "--repetitions", "3", "--db", str(db)]  # fmt: skip
    native = run_cli("run", "--versions", f"native=bin:{binary}", *args)
    in_docker = run_cli("run", "--runtime", "docker", "--versions", f"docker=bin:{binary}", *args)
    assert native.returncode == 0 and in_docker.returncode == 0, native.stderr + in_docker.stderr
    compare = ["compare", "--db", str(db), "--run", "2", "--baseline-run", "1", "--format",
               "json", "--show", "throughput", "--threshold", "25"]  # fmt: skip
    refused = cli_in_process(*compare)
    assert refused.returncode == 2 and "runtime native != docker" in refused.stderr
    compared = cli_in_process(*compare, "--force")
    assert compared.returncode == 0, compared.stderr
    (record,) = json.loads(compared.stdout)["records"]
    assert record["baseline"] == "native" and record["candidate"] == "docker"
    assert record["baseline_value"] > 0 and record["candidate_value"] > 0
    assert record["ci_low_pct"] <= record["change_pct"] <= record["ci_high_pct"], record
    assert "runtime native != docker" in record["forced"]

    # A baseline measured in a container is not like a native candidate, in ci either.
    saved = cli_in_process("baseline", "save", "boxed", "--run", "2", "--db", str(db))
    assert saved.returncode == 0
    gate = ["ci", "--baseline-name", "boxed", "--candidate-version", f"bin:{binary}", "--metric",
            "throughput", *args[:-2], "--db", str(db), "--no-report"]  # fmt: skip
    refused = cli_in_process(*gate)
    assert refused.returncode == 2 and "runtime docker != native" in refused.stderr
    forced = run_cli(*gate, "--force", "--json", str(tmp_path / "ci.json"))
    outcome = json.loads((tmp_path / "ci.json").read_text())["outcome"]
    assert forced.returncode == (1 if outcome == "regression" else 0), forced.stderr
    assert "(FORCED: not like with like)" in forced.stdout.splitlines()[0]
    assert "runtime docker != native" in forced.stdout


def test_a_seed_is_mounted_on_dev_urandom_read_only(engine, server_image):
    """The container's redis-server reads regtrack's seed: two containers with one seed
    draw the same run_id (Redis takes it from /dev/urandom, like its hash seeds)."""

    def run_id(seed: str | None) -> str:
        with docker.docker_server(engine, server_image, (0,), run_id="t", seed=seed) as s:
            if seed is not None:
                container = engine.containers.get(s.info["container"]["id"])
                (mount,) = [
                    m for m in container.attrs["Mounts"] if m["Destination"] == "/dev/urandom"
                ]
                assert mount["RW"] is False
            return str(s.info["run_id"])

    assert run_id("dd44") == run_id("dd44") != run_id("ee55")
    assert run_id(None) != run_id(None)


def test_a_server_that_took_the_port_is_never_measured(
    engine, server_image, redis_server, tmp_path, monkeypatch
):
    """The host network lets another server win the race for the chosen port: regtrack
    reads its own token (the container's `dir`) back, refuses the impostor, leaves it
    alone and starts on another port."""
    with decoy_server(redis_server, tmp_path) as (port, decoy_client, decoy):
        ports = iter([port])
        real = docker.free_port
        monkeypatch.setattr(docker, "free_port", lambda host: next(ports, None) or real(host))
        with docker.docker_server(engine, server_image, (0,), run_id="t") as server:
            assert server.port != port
            client = server.client()
            assert client.config_get("dir")["dir"] == server.token_dir
            client.close()
        assert decoy_client.ping() and decoy.poll() is None  # the impostor was left alone


def test_a_killed_regtracks_container_is_removed_by_the_next_run(tmp_path, engine, server_image):
    """Drill: SIGKILL regtrack while its container serves a trial. The container outlives
    it (the engine owns it), labelled with the dead regtrack's pid; the next docker run
    removes it and says so."""
    db = tmp_path / "r.db"
    proc = start_cli(
        "run", "--runtime", "docker", "--versions", f"image:{server_image}",
        "--pipelines", "1,10", "--repetitions", "3", "--duration", "3", "--warmup", "0.3",
        "--keys", "2000", "--db", str(db), "--no-report",
    )  # fmt: skip
    try:
        assert wait_for_trials(db, 1, timeout=120) >= 1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not engine.containers.list(
            filters={"label": docker.RUN_LABEL}
        ):
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    (left,) = engine.containers.list(all=True, filters={"label": docker.RUN_LABEL})
    assert left.labels[docker.PID_LABEL] == str(proc.pid)
    again = run_cli(
        "run", "--runtime", "docker", "--versions", f"image:{server_image}", *SHORT,
        "--repetitions", "1", "--db", str(tmp_path / "again.db"), "--no-report",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"removed container {left.name}, left by a regtrack that was killed" in again.stderr


def test_one_comparison_runs_one_kind_of_build(tmp_path, engine, offline_redis, env):
    """Official images only for all versions or none; --build-flags never silently
    skipped; the kind is recorded with the run."""
    base = ["run", "--runtime", "docker", "--source-repo", str(offline_redis), *SHORT,
            "--db", str(tmp_path / "r.db"), "--no-report"]  # fmt: skip
    flags = cli_in_process(
        *base, "--versions", "7.0.15", "--docker-images", "official", "--build-flags",
        "MALLOC=libc", env=env,
    )  # fmt: skip
    assert flags.returncode == 2
    assert "--build-flags cannot apply to official images" in flags.stderr
    mixed = cli_in_process(
        *base, "--versions", "7.0.15,unstable", "--docker-images", "official", env=env
    )
    assert mixed.returncode == 2, mixed.stderr
    assert "version 'unstable' is not a release tag" in mixed.stderr
    assert (
        not (tmp_path / "r.db").exists()
        or sqlite3.connect(tmp_path / "r.db").execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        == 0
    )


def test_a_persistent_container_writes_its_aof_to_the_data_directory(
    tmp_path, engine, server_image
):
    """With AOF on, a container's `dir` is a host directory below --data-dir (bind-mounted
    read-write), so its writes and fsyncs land on that filesystem, which the run records;
    the directory is gone with the container."""
    data = tmp_path / "data"
    data.mkdir()
    aof = ["--appendonly", "yes", "--appendfsync", "always"]
    with docker.docker_server(
        engine, server_image, (0,), run_id="t", settings=aof, data_dir=str(data)
    ) as server:
        container = engine.containers.get(server.info["container"]["id"])
        (mount,) = [m for m in container.attrs["Mounts"] if m["Destination"] == server.token_dir]
        assert mount["Type"] == "bind" and mount["RW"] is True
        host_dir = Path(mount["Source"])
        assert host_dir.parent == data
        info = host_dir.stat()
        assert info.st_mode & 0o777 == 0o700, "the data folder is the server's alone"
        assert info.st_uid == docker.container_user()[0] != 0
        client = server.client()
        for n in range(100):
            client.set(f"k{n}", "v" * 100)
        assert client.info("persistence")["aof_enabled"] == 1
        client.close()
        written = sum(p.stat().st_size for p in host_dir.rglob("*") if p.is_file())
        assert written > 100 * 100, "the AOF is on the host's filesystem"
    assert not host_dir.exists() and not list(data.iterdir())

    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--runtime", "docker", "--versions", f"a=image:{server_image}", *SHORT,
        "--repetitions", "1", "--duration", "0.5", "--server-config", "appendonly=yes",
        "--data-dir", str(data), "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = json.loads(sqlite3.connect(db).execute("SELECT config FROM runs").fetchone()[0])
    where = filesystems.of(data)
    assert config["server_data"]["persistent"] is True
    assert config["server_data"]["dir"] == str(data.resolve())
    assert config["server_data"]["filesystem"] == where["filesystem"] != "unknown"
