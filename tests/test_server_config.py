"""Server settings (redis.conf) applied to every version: shape checked at once, each
version asked whether it knows them and read back before measuring, stored with the run,
shown in every output and part of what makes two runs comparable."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regtrack.bench.server_settings import same
from regtrack.core.errors import BadInput
from regtrack.workloads import server_config
from tests.conftest import run_cli

QUICK = ["--pipelines", "10", "--repetitions", "1", "--duration", "0.5", "--warmup", "0.1",
         "--keys", "1000", "--no-report"]  # fmt: skip


def test_settings_are_parsed_combined_and_refused_in_one_line():
    s = server_config.parse_option("appendonly=yes")
    assert (s.name, s.value, s.optional) == ("appendonly", "yes", False)
    opt = server_config.parse_option("io-threads?=4")
    assert (opt.name, opt.optional, opt.key) == ("io-threads", True, "io-threads?")
    table = server_config.from_table({"appendonly": True, "hz": 50}, "w")
    assert [(x.name, x.value) for x in table] == [("appendonly", "yes"), ("hz", "50")]
    both = server_config.combine(table, [server_config.parse_option("hz=100")])
    assert server_config.as_table(both) == {"appendonly": "yes", "hz": "100"}, "the option wins"
    assert server_config.argv(both) == ["--appendonly", "yes", "--hz", "100"]
    for bad, words in (
        ("appendonly", "KEY=VALUE"),
        ("requirepass=x", "secret"),
        ("port=1", "set by regtrack"),
        ("Bad Name=1", "not a server setting name"),
    ):
        with pytest.raises(BadInput, match=words):
            server_config.parse_option(bad)


@given(st.text(max_size=40))
def test_any_option_text_is_a_setting_or_one_clear_error(text):
    try:
        s = server_config.parse_option(text)
    except BadInput as exc:
        assert "\n" not in str(exc)
    else:
        assert s.name and s.name not in server_config.SECRETS | server_config.OWNED


def test_values_read_back_as_redis_conf_reads_them():
    assert same("EverySec", "everysec") and same("100mb", "104857600") and same("1k", "1000")
    assert same("3600 1  300 100", "3600 1 300 100")
    assert not same("yes", "no") and not same("100mb", "100000000")


def test_io_threads_need_server_cpus(redis_server, tmp_path):
    proc = run_cli("run", "--versions", f"a=bin:{redis_server}", *QUICK, "--server-cpus", "0",
                   "--server-config", "io-threads=4", "--db", str(tmp_path / "r.db"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "io-threads 4 needs 4 server CPUs" in line and "--server-cpus" in line
    assert not (tmp_path / "r.db").exists() or _count(tmp_path / "r.db", "runs") == 0


def _count(db, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_an_unknown_setting_names_itself_and_the_version(redis_server, tmp_path):
    db = tmp_path / "r.db"
    proc = run_cli("run", "--versions", f"a=bin:{redis_server}", *QUICK,
                   "--server-config", "no-such-setting=1", "--db", str(db))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "no-such-setting" in line and "a (Redis 7." in line and "Traceback" not in proc.stderr
    assert _count(db, "runs") == 0, "refused before the run is recorded"

    optional = run_cli("run", "--versions", f"a=bin:{redis_server}", *QUICK,
                       "--server-config", "no-such-setting?=1", "--server-config", "hz=25",
                       "--db", str(db))  # fmt: skip
    assert optional.returncode == 0, optional.stderr
    assert "does not know server setting no-such-setting" in optional.stderr
    with sqlite3.connect(db) as conn:
        details = json.loads(conn.execute("SELECT details FROM targets").fetchone()[0])
    assert details["server_config"] == {"hz": "25"}, "the version ran without it"


def _writes_per_op(db, run_id: int) -> float:
    with sqlite3.connect(db) as conn:
        writes, calls = conn.execute(
            "SELECT SUM(syscalls_write), SUM(server_calls) FROM trials WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    return writes / calls


def test_an_aof_run_records_its_settings_costs_writes_and_stays_apart(redis_server, tmp_path):
    """The streams-queue mix on one build, plain and with AOF on a real directory."""
    db, data = tmp_path / "r.db", tmp_path / "data"
    data.mkdir()
    mix = ["--versions", f"a=bin:{redis_server}", "--workload", "streams-queue", "--loadgen",
           "builtin", "--pipelines", "10", "--repetitions", "2", "--duration", "1",
           "--warmup", "0.2", "--keys", "1000", "--no-report", "--db", str(db)]  # fmt: skip
    plain = run_cli("run", *mix)
    assert plain.returncode == 0, plain.stderr
    aof = run_cli("run", *mix, "--server-config", "appendonly=yes", "--server-config",
                  "appendfsync=everysec", "--data-dir", str(data))  # fmt: skip
    assert aof.returncode == 0, aof.stderr
    with sqlite3.connect(db) as conn:
        config = json.loads(conn.execute("SELECT config FROM runs WHERE id = 2").fetchone()[0])
    assert config["workload"]["server"] == {"appendonly": "yes", "appendfsync": "everysec"}
    assert config["server_data"]["persistent"] and config["server_data"]["filesystem"]
    assert config["server_data"]["dir"] == str(data.resolve())
    assert _writes_per_op(db, 2) > 1.2 * _writes_per_op(db, 1), "AOF writes show per op"

    shown = run_cli("compare", "--db", str(db), "--run", "2", "--baseline-run", "2",
                    "--candidate", "a", "--baseline", "a")  # fmt: skip
    # Stored as JSON with sorted keys; the caption names the data directory's filesystem.
    assert "appendfsync everysec, appendonly yes; data on" in shown.stdout, shown.stdout
    records = json.loads(run_cli("compare", "--db", str(db), "--run", "2", "--baseline-run",
                                 "2", "--candidate", "a", "--baseline", "a", "--format",
                                 "json").stdout)  # fmt: skip
    assert records and all(r["server_config"]["appendonly"] == "yes" for r in records)
    refused = run_cli("compare", "--db", str(db), "--run", "2", "--baseline-run", "1",
                      "--candidate", "a", "--baseline", "a")  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "server" in refused.stderr and "Traceback" not in refused.stderr
    forced = run_cli("compare", "--db", str(db), "--run", "2", "--baseline-run", "1",
                     "--candidate", "a", "--baseline", "a", "--force")  # fmt: skip
    assert forced.returncode == 0 and "FORCED" in forced.stdout, forced.stderr


@pytest.mark.parametrize("preset", ["list-queue", "lua-dispatch", "streams-queue",
                                    "priority-streams"])  # fmt: skip
def test_each_preset_ships_its_librarys_settings_ready_to_enable(preset, tmp_path):
    from regtrack.workloads.files import find_workload, load_workload

    text = find_workload(preset).read_text()
    lines = text.splitlines()
    start = lines.index("# [server]")
    enabled = lines[:start] + [line.removeprefix("# ") for line in lines[start:]]
    path = tmp_path / f"{preset}.toml"
    path.write_text("\n".join(enabled) + "\n")
    workload = load_workload(str(path))
    settings = server_config.from_table(workload.server, preset)
    assert {s.name for s in settings} >= {"maxmemory-policy"}
    assert "https://" in "\n".join(lines[:start][-8:]), "says whose docs recommend them"
    assert load_workload(preset).server == {}, "shipped commented: defaults unless enabled"


def _job(binary: str, table: dict, **cpus):
    from regtrack.bench.job import Job
    from regtrack.bench.loadgen import redis_benchmark
    from regtrack.core.cpus import CpuPlan
    from regtrack.core.settings import load_settings
    from regtrack.targets.versions import parse_specs, resolve
    from regtrack.workloads.files import load_workload

    workload = load_workload("get-pipeline", keys=1000, pipelines=[10])
    return Job(
        targets=resolve(parse_specs(f"a=bin:{binary}")),
        workload=workload.model_copy(update={"server": table}),
        settings=load_settings(duration=0.5, warmup=0.1, repetitions=1),
        cpus=CpuPlan(cpus.get("server", (0,)), cpus.get("client", (1,))),
        loadgen=redis_benchmark.locate(),
    )


def test_io_threads_are_applied_and_observed(redis_server):
    """io-threads 2 on two server CPUs (on 2 cores no CPU is left for a load generator, so
    only the check runs): the setting is read back, and the server runs the threads."""
    from regtrack.bench import server_settings
    from regtrack.bench.runner import plain_server

    said: list[str] = []
    job = _job(redis_server, {"io-threads": "2"}, server=(0, 1))
    server_settings.check(job, said.append)
    (target,) = job.targets
    assert target.details["server_config"] == {"io-threads": "2"} and not said
    with plain_server(job, target, "t") as server:
        client = server.client()
        assert client.config_get("io-threads") == {"io-threads": "2"}
        client.close()
        threads = list(Path(f"/proc/{server.pid}/task").iterdir())
        names = {(t / "comm").read_text().strip() for t in threads}
    assert any(name.startswith("io_thd") for name in names), names


def test_a_background_rewrite_during_a_trial_makes_it_invalid(redis_server, tmp_path):
    """An AOF told to rewrite itself after every 1% of growth (and 1 KiB), under a mix that
    writes (XADD): the server cron starts rewrites during the measured window."""
    db = tmp_path / "r.db"
    proc = run_cli("run", "--versions", f"a=bin:{redis_server}", "--workload", "streams-queue",
                   "--loadgen", "builtin", "--pipelines", "10", "--repetitions", "1",
                   "--duration", "1", "--warmup", "0.2", "--keys", "1000", "--no-report",
                   "--server-config", "appendonly=yes", "--server-config",
                   "auto-aof-rewrite-percentage=1", "--server-config",
                   "auto-aof-rewrite-min-size=1kb", "--data-dir", str(tmp_path),
                   "--db", str(db))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as conn:
        reasons = [r[0] or "" for r in conn.execute("SELECT invalid_reason FROM trials")]
    assert reasons and all("background save or AOF rewrite" in r for r in reasons), reasons
