"""A GET sweep without --loadgen is driven by memtier_benchmark when a short memtier trial
saturates the server, else by redis-benchmark; the run says which and why, stores the
probe, and keeps the answer for this machine and setup (bench/loadgen_choice.py)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from regtrack.bench import loadgen_choice
from regtrack.bench.prepare import prepare_job
from regtrack.bench.trial import judge_load
from regtrack.core.options import Options
from regtrack.core.records import InvalidReason, TrialRecord
from regtrack.core.settings import load_settings
from regtrack.targets import versions
from tests.conftest import run_cli, settings_dir
from tests.fakebench import Model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _job(redis_server: str, **options):
    specs = versions.parse_specs(f"a=bin:{redis_server}")
    return prepare_job(specs, Options(pipelines=[1, 10], keys=2000, **options))


def _probed(cache, server: float, client: float, contended: float = 0.0) -> Model:
    """A seam whose probe trial has these figures (judged as a real one is), keeping its
    answers in ``cache``."""
    return Model(probe_cpu=(server, client, contended), loadgen_answers=cache / "loadgen-choice")


@pytest.mark.parametrize(
    ("server", "client", "tool"),
    [(99.0, 60.0, "memtier"), (83.0, 99.0, "redis-benchmark"), (99.0, 95.0, "redis-benchmark")],
)
def test_memtier_only_where_it_saturates_the_server_and_the_answer_is_kept(
    redis_server, memtier_bin, cache, server, client, tool
):
    model = _probed(cache, server, client)
    built = _job(redis_server)
    assert built.loadgen_choice is None and built.loadgen.name == "redis-benchmark", "undecided"
    job = loadgen_choice.settle(built, model)
    choice = job.loadgen_choice
    assert choice.tool == tool and model.probes == 1
    assert built.loadgen_choice is None, "the job as built is not changed"
    assert job.loadgen.name == {"memtier": "memtier_benchmark"}.get(tool, tool)
    assert f"at pipeline 10: server {server:.0f}% busy, client {client:.0f}%" in choice.why
    assert ("saturates the server" in choice.why) == (tool == "memtier")
    assert job.config().loadgen_choice.probe.server_cpu_pct == server
    again = loadgen_choice.settle(_job(redis_server), model).loadgen_choice
    assert (again.tool, again.why, model.probes) == (tool, choice.why, 1), "kept, not probed again"
    assert again.cached and again.cached.startswith(str(cache))


def test_a_kept_answer_that_is_not_regtracks_is_ignored(redis_server, memtier_bin, cache):
    model = _probed(cache, 83.0, 99.0)
    first = loadgen_choice.settle(_job(redis_server), model).loadgen_choice
    kept = next((cache / "loadgen-choice").glob("*.json"))
    for text in ('{"tool": "rm -rf /", "why": "x"}', "not json", '{"tool": "memtier"}'):
        kept.write_text(text)
        assert loadgen_choice.settle(_job(redis_server), model).loadgen_choice.tool == first.tool
    assert model.probes == 4, "each crafted answer was probed anew"


def test_a_probe_that_says_nothing_of_the_machine_is_not_kept(redis_server, memtier_bin, cache):
    """Contended, or failed outright: redis-benchmark this time, and the next run probes."""
    model = _probed(cache, 99.0, 60.0, contended=40.0)
    first = loadgen_choice.settle(_job(redis_server), model).loadgen_choice
    assert first.tool == "redis-benchmark" and "the probe was not usable (contended" in first.why

    model.probe_error = ConnectionError("Connection reset by peer")
    second = loadgen_choice.settle(_job(redis_server), model).loadgen_choice
    assert second.tool == "redis-benchmark"
    assert "could not be probed: Connection reset" in second.why
    assert model.probes == 2 and not (cache / "loadgen-choice").exists()


def test_a_seam_that_keeps_no_answers_neither_reads_nor_writes_them(
    redis_server, memtier_bin, cache
):
    """A modelled run (loadgen_answers None) probes every time and leaves regtrack's cache
    as it was: a modelled answer never decides a real run, nor a real one a model."""
    real = _probed(cache, 99.0, 60.0)
    assert loadgen_choice.settle(_job(redis_server), real).loadgen_choice.tool == "memtier"
    kept = sorted((cache / "loadgen-choice").iterdir())
    model = Model(probe_cpu=(83.0, 99.0, 0.0))
    for n in (1, 2):
        choice = loadgen_choice.settle(_job(redis_server), model).loadgen_choice
        assert (choice.tool, choice.cached, model.probes) == ("redis-benchmark", None, n)
    assert sorted((cache / "loadgen-choice").iterdir()) == kept


def test_client_bound_is_judged_on_the_cpus_its_threads_can_use():
    """Two memtier threads on two client CPUs at 120% (of one CPU) use 60% of theirs."""
    settings = load_settings()

    def judged(client: float, threads: int, cpus: int) -> list[InvalidReason]:
        record = TrialRecord(0, 0, "a", "w", "p", {}, "now")
        record.valid, record.server_cpu_pct, record.client_cpu_pct = True, 99.0, client
        judge_load(settings, record, threads=threads, client_cpus=cpus, saturates=True)
        return [r.code for r in record.reasons]

    bound = [InvalidReason.CLIENT_BOUND]
    assert judged(120.0, threads=2, cpus=2) == []
    assert judged(95.0, threads=1, cpus=2) == bound
    assert judged(185.0, threads=2, cpus=2) == bound
    assert judged(120.0, threads=4, cpus=1) == bound, "threads share a CPU"


def test_no_probe_where_the_user_chose_or_nothing_depends_on_it(redis_server, cache):
    assert _job(redis_server, loadgen="redis-benchmark").loadgen_choice.why == "--loadgen"
    counted = _job(redis_server, metric="instructions").loadgen_choice
    assert counted.tool == "redis-benchmark" and counted.probe is None


@pytest.mark.slow
def test_a_real_probe_says_which_and_why_and_is_stored(
    tmp_path, redis_server, memtier_bin, redis_benchmark_bin
):
    """One short memtier GET trial at the deepest pipeline decides; on a 2-vCPU VM its one
    thread is client-bound, so redis-benchmark drives the sweep (docs/workloads.md)."""
    env = {"REGTRACK_CACHE": str(tmp_path / "cache")}
    args = ["run", "--versions", f"a=bin:{redis_server}", "--pipelines", "1,10",
            "--repetitions", "1", "--duration", "1", "--warmup", "0.3", "--keys", "2000",
            "--no-report", "--db", str(tmp_path / "r.db")]  # fmt: skip
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("regtrack: load generator:")]
    assert "memtier_benchmark with 1 thread on CPU 1 at pipeline 10: server " in line, line
    config, loadgen = (
        sqlite3.connect(tmp_path / "r.db").execute("SELECT config, loadgen FROM runs").fetchone()
    )
    choice = json.loads(config)["loadgen_choice"]
    probe = choice["probe"]
    assert probe["pipeline"] == 10 and probe["ops_per_sec"] > 0
    saturates = probe["server_cpu_pct"] >= 85 and probe["client_cpu_pct"] < 90
    assert choice["tool"] == ("memtier" if saturates else "redis-benchmark")
    assert json.loads(loadgen)["name"] == ("memtier_benchmark" if saturates else "redis-benchmark")
    assert f"load generator: {choice['tool']} (" in line


def test_a_run_that_relaxes_its_limits_does_not_relax_the_probe(
    redis_server, memtier_bin, cache, monkeypatch, tmp_path
):
    """Quiet rules (nothing client-bound) would pass any probe: the probe keeps the
    defaults, so memtier at 99% of its CPU still does not saturate the server."""
    configs = settings_dir(
        tmp_path, "[run]\nclient_bound_cpu_pct = 100\nserver_bound_cpu_pct = 0\n"
    )
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    model = _probed(cache, 83.0, 99.0)
    assert loadgen_choice.settle(_job(redis_server), model).loadgen_choice.tool == "redis-benchmark"
