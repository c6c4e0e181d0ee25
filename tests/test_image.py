"""regtrack's own image (the Dockerfile; examples/kubernetes-indexed-job.yaml runs it):
built for real from a base made of this machine's packages (tests/image_build.py), then
`regtrack doctor` and a short `regtrack run` of Redis 7.0.15 inside it, as the Kubernetes
example's pod runs them (non-root, no capability, seccomp unconfined, pinned CPUs)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests import image_build
from tests.conftest import MAKE_FLAGS, labelled_containers, quiet_configs

LABEL = "regtrack-test.image"
# What the Kubernetes example's securityContext gives the pod (docs/scale-out.md).
POD_SECURITY = {
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges", "seccomp=unconfined"],
}


def test_the_image_installs_what_install_sh_installs():
    """docker/packages-*.txt and scripts/install.sh name the same tools (fast: no build)."""
    script = (image_build.ROOT / "scripts" / "install.sh").read_text()
    packages = re.search(r"^PACKAGES=\(([^)]*)\)", script, re.M)
    build = re.search(r"^MEMTIER_BUILD_PACKAGES=\(([^)]*)\)", script, re.M)
    assert packages and build
    assert set(packages.group(1).split()) <= set(image_build.listed("runtime"))
    assert build.group(1).split() == list(image_build.listed("build"))
    ignored = (image_build.ROOT / ".dockerignore").read_text()
    dockerfile = (image_build.ROOT / "Dockerfile").read_text()
    for copied in re.findall(r"^COPY (?!--from)(.*) \S+$", dockerfile, re.M):
        for path in copied.split():
            assert f"!{path.split('/')[0]}" in ignored or f"!{path}" in ignored, path


@pytest.fixture(scope="module")
def image(engine) -> str:
    base = image_build.base_image(engine)
    image_id, _ = image_build.build(base)
    return image_id


@pytest.fixture(autouse=True)
def no_containers_left():
    yield
    left = labelled_containers(LABEL)
    assert not left, f"containers left behind: {left}"


def _cpus() -> str:
    """Two CPUs this test may use, for --cpuset-cpus (regtrack pins inside them)."""
    return ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:2])


def _run(engine: Any, image: str, args: list[str], **options: Any) -> tuple[int, str, str]:
    """``docker run IMAGE ARGS``, pinned: (exit code, stdout, stderr); always removed."""
    container = engine.containers.run(
        image, args, detach=True, labels={LABEL: "1"}, cpuset_cpus=_cpus(), **options
    )
    try:
        code = container.wait(timeout=600)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    return code, out, err


@pytest.mark.extended
@pytest.mark.timeout(900)
def test_doctor_runs_in_the_image_as_a_user_with_seeds_controlled(engine, image):
    config = engine.images.get(image).attrs["Config"]
    assert config["User"] == "regtrack", "non-root by default"
    code, out, err = _run(engine, image, ["doctor", "--format", "json"], **POD_SECURITY)
    assert code in (0, 3), err  # 3: a problem on this busy machine, never a crash
    report = json.loads(out)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["exit_code"] == code and len(checks) > 10
    assert checks["hash seeds"]["status"] == "ok", checks["hash seeds"]
    assert "v=2.3.0" in checks["load generator"]["found"], "the pinned memtier_benchmark"
    cargo = tomllib.loads((image_build.ROOT / "engine" / "Cargo.toml").read_text())
    engine_check = checks["open-loop engine"]
    assert engine_check["status"] == "ok", engine_check
    assert f"regtrack-openloop {cargo['package']['version']}" in engine_check["found"]
    assert checks["pinning (taskset, setpriv)"]["status"] == "ok"
    assert checks["valgrind (callgrind)"]["status"] == "ok"
    assert checks["build tools"]["status"] == "ok"
    # The runtime's default seccomp profile refuses unshare(2): why the pod asks for less.
    code, out, _ = _run(engine, image, ["doctor", "--format", "json"], cap_drop=["ALL"])
    seeds = {c["name"]: c for c in json.loads(out)["checks"]}["hash seeds"]
    assert code == 3 and seeds["status"] == "problem"


@pytest.mark.extended
@pytest.mark.timeout(900)
def test_a_short_run_in_the_image_builds_and_measures(engine, image, offline_redis, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o777)  # written by the image's user
    quiet_configs(results)
    code, out, err = _run(
        engine, image,
        ["run", "--versions", "7.0.15", "--source-repo", "/sources", "--duration", "0.5",
         "--warmup", "0.1", "--repetitions", "1", "--pipelines", "10", "--keys", "1000",
         "--build-flags", " ".join(MAKE_FLAGS), "--no-report", "--db", "/results/r.db"],
        volumes={str(offline_redis): {"bind": "/sources", "mode": "ro"},
                 str(results): {"bind": "/results", "mode": "rw"}},
        environment={"REGTRACK_CONFIG_DIR": "/results/configs"},
        **POD_SECURITY,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert "7.0.15" in out
    conn = sqlite3.connect(Path(results, "r.db"))
    assert conn.execute("SELECT redis_version FROM targets").fetchall() == [("7.0.15",)]
    assert conn.execute("SELECT COUNT(*) FROM trials WHERE ops_per_sec > 0").fetchone()[0] == 1
    config = json.loads(conn.execute("SELECT config FROM runs").fetchone()[0])
    assert config["seeds"] == "fixed", "seeds controlled inside the container"
    conn.close()
