"""Server settings (redis.conf) applied to every version: shape checked at once, each
version asked whether it knows them and read back before measuring, stored with the run,
shown in every output and part of what makes two runs comparable."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regtrack.bench.server_settings import same
from regtrack.core.cpus import Topology
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason
from regtrack.workloads import server_config
from tests.conftest import cli_in_process, quiet_configs, run_cli
from tests.reasons import stored_reasons
from tests.test_report import Page
from tests.test_report import browser as browser  # the Chromium fixture

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
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{redis_server}", *QUICK, "--server-cpus", "0",
        "--server-config", "io-threads=4", "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "io-threads 4 needs 4 server CPUs" in line and "--metric instructions" in line
    usable = len(Topology.detect().usable)
    if usable > 4:  # what to pass here, or that this machine is too small for it
        assert "--server-cpus 0-3 and --client-cpus on others" in line, line
    else:
        assert f"this machine has {usable} usable CPUs" in line, line
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
    shown = cli_in_process("compare", "--db", str(db))
    assert "a ran without no-such-setting (optional, unknown to it)" in shown.stdout, shown.stdout


def _writes_per_op(db, run_id: int) -> float:
    with sqlite3.connect(db) as conn:
        writes, calls = conn.execute(
            "SELECT SUM(syscalls_write), SUM(server_calls) FROM trials WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    return writes / calls


def test_an_aof_run_records_its_settings_costs_writes_and_stays_apart(
    redis_server, tmp_path, browser
):
    """The streams-queue mix on one build, plain and with AOF on a real directory; every
    output shows the settings, and the two runs are compared only when forced."""
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

    shown = cli_in_process("compare", "--db", str(db), "--run", "2", "--baseline-run", "2",
                    "--candidate", "a", "--baseline", "a")  # fmt: skip
    # Stored as JSON with sorted keys; the caption names the data directory's filesystem.
    assert "appendfsync everysec, appendonly yes; data on" in shown.stdout, shown.stdout
    records = json.loads(cli_in_process("compare", "--db", str(db), "--run", "2", "--baseline-run",
                                 "2", "--candidate", "a", "--baseline", "a", "--format",
                                 "json").stdout)["records"]  # fmt: skip
    assert records and all(r["server_config"]["appendonly"] == "yes" for r in records)
    assert all(r["server_data"]["dir"] == str(data.resolve()) for r in records)
    assert all(r["server_without"] == {} for r in records)
    refused = cli_in_process("compare", "--db", str(db), "--run", "2", "--baseline-run", "1",
                      "--candidate", "a", "--baseline", "a")  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "server" in refused.stderr and "Traceback" not in refused.stderr
    forced = cli_in_process("compare", "--db", str(db), "--run", "2", "--baseline-run", "1",
                     "--candidate", "a", "--baseline", "a", "--force")  # fmt: skip
    assert forced.returncode == 0 and "FORCED" in forced.stdout, forced.stderr
    markdown = cli_in_process(
        "compare", "--db", str(db), "--run", "2", "--format", "markdown"
    ).stdout
    assert "server: appendfsync everysec, appendonly yes; data on" in markdown, markdown

    # The report says it too: on the run page, per version, in the environment, the index.
    assert cli_in_process("report", "--db", str(db)).returncode == 0
    page = Page(browser, tmp_path / "run-2.html")
    line = page.page.locator("#server-config").inner_text()
    assert line.startswith("server: appendfsync everysec, appendonly yes; data on "), line
    assert "appendonly yes" in page.page.locator("#versions tbody tr").first.inner_text()
    environment = page.page.locator("#environment").inner_text()
    assert f"server data dir\t{data.resolve()}" in environment, environment
    assert f"server data filesystem\t{config['server_data']['filesystem']}" in environment
    page.clean()
    plain_page = Page(browser, tmp_path / "run-1.html")
    assert plain_page.page.locator("#server-config").inner_text() == (
        "server: defaults (no persistence)"
    )
    assert "server data" not in plain_page.page.locator("#environment").inner_text()
    index = Page(browser, tmp_path / "index.html")
    servers = [c.inner_text() for c in index.page.locator("#runs tr.run td.server").all()]
    assert servers[0].startswith("appendfsync everysec, appendonly yes; data on "), servers
    assert servers[1] == "defaults (no persistence)", "newest first"


def test_history_keeps_runs_with_other_settings_on_a_line_of_their_own(redis_server, tmp_path):
    """One binary measured plain and with hz 25: two series, each saying what its servers
    ran with, in `regtrack history` and on the history page."""
    db = tmp_path / "r.db"
    env = quiet_configs(tmp_path, server_bound_cpu_pct=0)  # pages, not noise
    for extra in ([], ["--server-config", "hz=25"]):
        proc = run_cli("run", "--versions", f"a=bin:{redis_server}", *QUICK, *extra,
                       "--db", str(db), env=env)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    shown = cli_in_process(
        "history", "--db", str(db), "--by", "run", "--show", "throughput", env=env
    )
    headers = [line for line in shown.stdout.splitlines() if line.startswith("get-pipeline")]
    assert len(headers) == 2, shown.stdout
    assert headers[0].endswith("· server: defaults (no persistence)"), headers
    assert headers[1].endswith("· server: hz 25"), headers
    assert cli_in_process("report", "--db", str(db), env=env).returncode == 0
    (page,) = tmp_path.glob("history-get-pipeline-pipeline_10-throughput-*.html")
    text = page.read_text()
    assert f"bin:{redis_server} · hz 25 (setup" in text  # the values table names the series
    assert f"bin:{redis_server} · defaults (no persistence) (setup" in text


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
    from regtrack.bench.real import RealBench
    from regtrack.bench.servers import plain_server

    said: list[str] = []
    planned = _job(redis_server, {"io-threads": "2"}, server=(0, 1))
    job = server_settings.check(planned, RealBench(), said.append)
    assert planned.targets[0].server_config is None, "the plan is not changed"
    (target,) = job.targets
    assert target.server_config == {"io-threads": "2"} and not said
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
    saves = [
        [r for r in reasons if r.code is InvalidReason.BACKGROUND_SAVE]
        for reasons in stored_reasons(db)
    ]
    assert saves and all(saves), saves
    assert all("auto-aof-rewrite-percentage=0" in s[0].detail for s in saves), "says how to prevent"


def test_a_rewrite_or_save_that_ended_between_snapshots_is_seen_on_6_2(
    offline_redis, tmp_path, monkeypatch
):
    """Redis 6.2 counts neither rewrites nor saves (aof_rewrites, rdb_saves are 7.0's): one
    that starts and ends within a trial shows only as a moved aof_base_size or
    rdb_last_save_time, between the trial's two INFO snapshots."""
    from regtrack.bench import serverstats
    from regtrack.bench.runtimes.native import native_server
    from regtrack.targets.build import build_commit
    from regtrack.targets.sources import SourceRepo
    from tests.conftest import MAKE_FLAGS, TEST_CACHE

    monkeypatch.setenv("REGTRACK_CACHE", str(TEST_CACHE))  # the tests' cached builds
    repo = SourceRepo(str(offline_redis))
    binary = build_commit(repo, repo.resolve("6.2.14").commit, MAKE_FLAGS).server
    aof = ["--appendonly", "yes"]
    with native_server(binary, (0,), settings=aof, data_dir=str(tmp_path)) as server:
        client = server.client()
        for n in range(1000):
            client.set(f"k{n}", "v" * 100)
        for command, running in (
            ("BGREWRITEAOF", ("aof_rewrite_in_progress", "aof_rewrite_scheduled")),
            ("BGSAVE", ("rdb_bgsave_in_progress",)),
        ):
            before = serverstats.snapshot(client)
            assert "aof_rewrites" not in before.stats and "rdb_saves" not in before.stats
            time.sleep(1.1)  # rdb_last_save_time counts seconds
            client.execute_command(command)
            deadline = time.monotonic() + 30
            while any(client.info("persistence")[key] for key in running):
                assert time.monotonic() < deadline, f"{command} did not finish"
                time.sleep(0.05)
            after = serverstats.snapshot(client)
            assert serverstats.delta(before, after).background_persistence > 0, command
            idle = serverstats.snapshot(client)
            assert serverstats.delta(after, idle).background_persistence == 0
        client.close()


def test_instruction_counts_sum_every_server_thread(redis_server, tmp_path):
    """--metric instructions with io-threads 2 on one server CPU (valgrind runs one server
    thread at a time, so a count needs no more): allowed, with a warning, and the count
    holds what only the I/O threads run (IOThreadMain), besides the main thread's work."""
    db = tmp_path / "r.db"
    proc = run_cli("run", "--versions", f"a=bin:{redis_server}", "--metric", "instructions",
                   "--server-config", "io-threads=2", "--server-config", "io-threads-do-reads=yes",
                   "--server-cpus", "0", "--pipelines", "1", "--clients", "50", "--keys", "1000",
                   "--repetitions", "1", "--instruction-requests", "10000", "--no-report",
                   "--db", str(db))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: io-threads 2 under callgrind" in proc.stderr
    with sqlite3.connect(db) as conn:
        costs = dict(conn.execute("SELECT function, inclusive FROM function_costs").fetchall())
    assert costs.get("IOThreadMain", 0) > 0, "the I/O threads' work is in the count"
    assert costs.get("processCommand", 0) > 0, "and the main thread's"
