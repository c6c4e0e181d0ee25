"""Command-mix workloads: validation, replay with real servers, reply checks, capture."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from regtrack.bench.loadgen.builtin import _Rotation
from regtrack.bench.runtimes.native import native_server
from regtrack.core import redact
from regtrack.core.errors import BadInput
from regtrack.core.records import (
    CommandCounts,
    InvalidReason,
    LoadSpec,
    MixCommand,
    ServerDelta,
    TrialReason,
)
from regtrack.workloads import capture
from regtrack.workloads.files import list_workloads, load_workload
from tests.conftest import BUILD_FLAGS, cli_in_process, run_cli
from tests.reasons import codes, stored_reasons

PRESETS = ["streams-queue", "list-queue", "priority-streams", "lua-dispatch"]
SHORT = ["--pipelines", "10", "--duration", "1", "--warmup", "0.3", "--repetitions", "1"]

GOOD = """
name = "t"
kind = "mix"
min_redis = "6.2"
data_size = 16
keys = 100
[[setup]]
command = ["XAUTOCLAIM", "s", "g", "c", "0", "0"]
[[setup]]
command = ["SCRIPT", "LOAD", "return 1"]
save_as = "one"
[[commands]]
args = ["SET", "k:__key__", "__data__"]
[[commands]]
args = ["EVALSHA", "${one}", "0"]
"""


SET_LINE = 'args = ["SET", "k:__key__", "__data__"]'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mix.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load_and_cite_what_they_model(name):
    workload = load_workload(name)
    assert workload.kind == "mix" and workload.models and workload.approximations
    assert name in list_workloads()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("data_size = 16", "data_size = 16\ncolour = 1"), "field 'colour': unknown field"),
        ((SET_LINE, SET_LINE + "\nratio = 0"),
         "field 'commands[0].ratio': 0: give a whole number with 1 <= value <= 10000"),
        (('"__data__"]', '"x__data__"]'), "__data__ must be a whole argument"),
        (('min_redis = "6.2"', 'min_redis = "5.0"'),
         "setup[0]: XAUTOCLAIM needs Redis 6.2 but min_redis is 5.0; raise min_redis to 6.2"),
        (('"EVALSHA"', '"EVALSAH"'), "unknown command 'EVALSAH'"),
        (("${one}", "${two}"), "${two} is used but no earlier setup step has save_as = 'two'"),
        (('kind = "mix"', 'kind = "soup"'), "'soup' is not a workload kind"),
        (('args = ["EVALSHA", "${one}", "0"]', 'args = ["BRPOP", "q", "1"]'),
         "mixes the blocking BRPOP with other commands"),
        (('args = ["EVALSHA", "${one}", "0"]', 'args = ["GET", "k:__key__"]\nkey_pattern = "P"'),
         "lockstep (key_pattern P) needs every command with __key__ on P"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_line_naming_file_and_field(tmp_path, change, message):
    old, new = change
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(BadInput) as failure:
        load_workload(str(path))
    text = str(failure.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_a_bad_workload_file_on_the_command_line_is_exit_2(tmp_path, redis_server):
    path = _write(tmp_path, GOOD.replace("data_size = 16", "data_size = -1"))
    proc = cli_in_process("run", "--versions", f"bin:{redis_server}", "--workload", str(path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "field 'data_size'" in proc.stderr


def test_a_mix_newer_than_a_target_is_refused_before_measuring(tmp_path, redis_server):
    path = _write(tmp_path, GOOD.replace('min_redis = "6.2"', 'min_redis = "99.0"'))
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--workload", str(path), "--loadgen",
        "builtin", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "min_redis is 99.0 but version" in proc.stderr
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 0


@pytest.mark.parametrize("name", PRESETS)
def test_presets_replay_with_the_builtin_driver_without_errors(tmp_path, redis_server, name):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--workload", name, "--loadgen", "builtin",
        *SHORT, "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "built-in driver: its throughput measures the Python client" in proc.stderr
    (errors, requests, calls) = (
        sqlite3.connect(db)
        .execute("SELECT error_replies, requests, server_calls FROM trials")
        .fetchone()
    )
    (found,) = map(codes, stored_reasons(db))
    assert errors == 0 and requests > 100 and calls >= requests * 0.9
    assert not found & {InvalidReason.ERROR_REPLIES, InvalidReason.RATIOS_OFF}, found
    assert InvalidReason.BUILTIN_DRIVER in found, "builtin throughput never reaches a verdict"
    stats = (
        sqlite3.connect(db)
        .execute("SELECT command FROM command_stats WHERE source = 'server'")
        .fetchall()
    )
    assert stats, "per-command server counts are stored"


def test_a_mix_that_gets_wrongtype_is_invalid_and_names_the_error(tmp_path, redis_server):
    wrong = """
name = "wrong"
kind = "mix"
keys = 50
[[commands]]
args = ["SET", "k:__key__", "v"]
[[commands]]
args = ["HSET", "k:__key__", "f", "v"]
"""
    path = _write(tmp_path, wrong)
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--workload", str(path),
        "--loadgen", "builtin", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (errors,) = sqlite3.connect(db).execute("SELECT error_replies FROM trials").fetchone()
    (reasons,) = stored_reasons(db)
    assert errors > 0
    wrongtype = TrialReason(InvalidReason.ERROR_REPLIES, f"{errors} (WRONGTYPE x{errors})")
    assert wrongtype in reasons, reasons


def test_the_ratio_rule_names_the_command_that_drifted(tmp_path):
    """The ratio rule on counts (not a fault drill): the server ran 2000 GETs where the
    mix's ratios expect 500, as when another client sends GETs during a trial."""
    path = _write(
        tmp_path,
        GOOD.replace('args = ["EVALSHA", "${one}", "0"]', 'args = ["GET", "k:__key__"]').replace(
            '[[setup]]\ncommand = ["SCRIPT", "LOAD", "return 1"]\nsave_as = "one"\n', ""
        ),
    )
    workload = load_workload(str(path))
    from regtrack.workloads import points

    problems = points.mix_problems(workload, _counted(set=500, get=2000), [1000])
    assert problems == [
        TrialReason(
            InvalidReason.RATIOS_OFF,
            "GET ran 2000 times, the declared ratios expect about 500 (tolerance 10%)",
        )
    ]
    assert points.mix_problems(workload, _counted(set=500, get=500), [1000]) == []


def _counted(**calls: int) -> ServerDelta:
    """A trial's server counters with these calls per command and nothing else."""
    commands = {name: CommandCounts(n, 0.0, 0.0, 0.0) for name, n in calls.items()}
    return ServerDelta(1.0, 0.5, 0.0, 50.0, 0.0, 0.0, 0.0, commands, {})


def test_capture_sends_only_info_and_config_get(redis_server):
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        before = control.info("commandstats")
        observed = capture.sample(f"redis://127.0.0.1:{server.port}", 0.2)
        after = control.info("commandstats")
        control.close()
    assert observed.calls == {}
    changed = {
        name: after[name]["calls"] - before.get(name, {}).get("calls", 0)
        for name in after
        if after[name]["calls"] != before.get(name, {}).get("calls", 0)
    }
    # The capture's two INFO commandstats and one INFO server, plus our own second INFO,
    # and one CONFIG GET per listed setting (never CONFIG SET, never a pattern).
    assert changed == {"cmdstat_info": 4, "cmdstat_config|get": len(capture.CAPTURED_SETTINGS)}
    assert observed.settings["appendonly"] == "no" and "requirepass" not in observed.settings


def test_capture_of_a_busy_server_writes_a_mix_that_replays(
    tmp_path, redis_server, redis_benchmark_bin
):
    out = tmp_path / "captured.toml"
    with native_server(redis_server, (0,)) as server:
        client = subprocess.Popen(
            ["taskset", "-c", "1", redis_benchmark_bin, "-p", str(server.port), "-t",
             "set,get,lpush", "-n", "10000000", "-c", "5", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            time.sleep(0.3)
            proc = run_cli(
                "mix", "capture", "--url", f"redis://127.0.0.1:{server.port}",
                "--seconds", "1", "--out", str(out),
            )  # fmt: skip
        finally:
            client.kill()
            client.wait()
    assert proc.returncode == 0, proc.stderr
    assert f"{out}:" in proc.stdout and "commands in 1 s" in proc.stdout
    workload = load_workload(str(out))
    names = {c.args[0] for c in workload.all_commands}
    assert names & {"SET", "GET", "LPUSH"}, names
    db = tmp_path / "r.db"
    replay = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--workload", str(out),
        "--loadgen", "builtin", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert sqlite3.connect(db).execute("SELECT error_replies FROM trials").fetchone()[0] == 0


def test_capture_of_an_unreachable_server_is_exit_3(tmp_path):
    proc = run_cli("mix", "capture", "--url", "redis://127.0.0.1:1", "--seconds", "0.1",
                   "--out", str(tmp_path / "x.toml"))  # fmt: skip
    assert proc.returncode == 3 and "cannot read INFO" in proc.stderr
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize("name", PRESETS)
def test_presets_replay_with_memtier(tmp_path, redis_server, memtier_bin, name):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--workload", name, "--loadgen",
        "memtier", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = (
        sqlite3.connect(db)
        .execute("SELECT error_replies, requests, ops_per_sec FROM trials")
        .fetchone()
    )
    errors, requests, ops = row
    (found,) = map(codes, stored_reasons(db))
    assert errors == 0 and requests > 100 and ops > 0, row
    assert not found & {InvalidReason.ERROR_REPLIES, InvalidReason.RATIOS_OFF}, found
    rows = (
        sqlite3.connect(db)
        .execute("SELECT command FROM command_stats WHERE source = 'loadgen'")
        .fetchall()
    )
    assert rows, "memtier's per-command rows are stored"
    assert json.loads(json.dumps(rows))


# The first tier replays the streams queue with memtier and the list queue (blocking
# BRPOP) with the built-in driver on three real versions; every preset with both tools on
# one version is test_presets_replay_with_*. The other six pairs repeat that coverage.
FIRST_TIER = {("streams-queue", "memtier"), ("list-queue", "builtin")}
REAL_VERSIONS = [
    pytest.param(name, tool, marks=() if (name, tool) in FIRST_TIER else pytest.mark.extended)
    for tool in ("builtin", "memtier")
    for name in PRESETS
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "tool"), REAL_VERSIONS)
def test_presets_on_real_6_2_7_0_and_8_0(tmp_path, offline_redis, env, name, tool, request):
    if tool == "memtier":
        request.getfixturevalue("memtier_bin")  # skips where it is not installed
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", "6.2,7.0,unstable", "--source-repo", str(offline_redis),
        "--workload", name, "--loadgen", tool, *SHORT, *BUILD_FLAGS, "--db", str(db),
        "--no-report", env=env, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT g.redis_version, t.error_replies, t.requests"
            " FROM trials t JOIN targets g ON g.id = t.target_id ORDER BY t.seq"
        )
        .fetchall()
    )
    assert sorted(r[0] for r in rows) == ["6.2.14", "7.0.15", "8.0.6"]
    for (version, errors, requests), reasons in zip(rows, stored_reasons(db), strict=True):
        assert errors == 0, (version, reasons)
        assert requests > 100, (version, requests)
        assert InvalidReason.RATIOS_OFF not in codes(reasons), (version, reasons)


def test_the_builtin_driver_is_valid_for_instructions(tmp_path, redis_server):
    if not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--workload", "lua-dispatch",
        "--loadgen", "builtin", "--metric", "instructions", "--pipelines", "10",
        "--repetitions", "1", "--instruction-requests", "20000", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "built-in driver: its throughput" not in proc.stderr, "no caveat for instructions"
    per_op, errors = (
        sqlite3.connect(db)
        .execute("SELECT instructions_per_op, error_replies FROM trials")
        .fetchone()
    )
    (reasons,) = stored_reasons(db)
    assert per_op > 1000 and errors == 0
    assert InvalidReason.BUILTIN_DRIVER not in codes(reasons), reasons


SECRET = "s3cr3t-Pa55"


def test_capture_never_writes_or_prints_the_password(tmp_path, redis_server, redis_benchmark_bin):
    """A password in --url stays out of the workload file, stdout and every error line
    (an idle server, a wrong password, a malformed URL); the file still parses."""
    out = tmp_path / "captured.toml"
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        control.config_set("appendonly", "yes")
        control.config_set("maxmemory-policy", "allkeys-lru")
        control.config_set("requirepass", SECRET)
        control.close()
        url = f"redis://:{SECRET}@127.0.0.1:{server.port}/0"
        idle = run_cli("mix", "capture", "--url", url, "--seconds", "0.2", "--out", str(out))
        wrong = run_cli(
            "mix", "capture", "--url", url.replace(SECRET, SECRET + "x"), "--seconds", "0.2",
            "--out", str(out),
        )  # fmt: skip
        client = subprocess.Popen(
            ["taskset", "-c", "1", redis_benchmark_bin, "-p", str(server.port), "-a", SECRET,
             "-t", "set,get", "-n", "10000000", "-c", "5", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            time.sleep(0.3)
            busy = run_cli("mix", "capture", "--url", url, "--seconds", "0.5", "--out", str(out))
        finally:
            client.kill()
            client.wait()
    malformed = run_cli(
        "mix", "capture", "--url", f"redis://:{SECRET}@127.0.0.1:99999999", "--out", str(out)
    )
    assert idle.returncode == 3 and "ran no commands" in idle.stderr, idle.stderr
    assert wrong.returncode == 2 and wrong.stderr.startswith("regtrack: error:"), wrong.stderr
    assert malformed.returncode == 2, malformed.stderr
    assert busy.returncode == 0, busy.stderr
    for proc in (idle, wrong, busy, malformed):
        assert SECRET not in proc.stdout + proc.stderr
    text = out.read_text()
    assert SECRET not in text and ":***@127.0.0.1" in text
    captured = tomllib.loads(text)
    assert "***" in captured["description"]
    # The server's own settings, to replay the traffic against: never its password.
    assert captured["server"]["appendonly"] == "yes"
    assert captured["server"]["maxmemory-policy"] == "allkeys-lru"
    assert not any("pass" in key or "acl" in key for key in captured["server"])
    # Replayed against its own settings, into a database: still no password anywhere.
    replay = run_cli(
        "run", "--versions", f"a=bin:{redis_server}", "--workload", str(out), "--loadgen",
        "builtin", "--metric", "instructions", "--pipelines", "1", "--repetitions", "1",
        "--instruction-requests", "5000", "--keys", "100", "--data-dir", str(tmp_path),
        "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert SECRET not in replay.stdout + replay.stderr
    assert "appendonly yes" in replay.stdout and "maxmemory-policy allkeys-lru" in replay.stdout
    stored = sqlite3.connect(tmp_path / "r.db").execute("SELECT config FROM runs").fetchone()
    assert json.loads(stored[0])["workload"]["server"]["appendonly"] == "yes"
    assert (tmp_path / "r.db").exists() and (tmp_path / "run-1.html").exists()
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    name=st.text(),
    version=st.text(),
    password=st.text(
        alphabet=st.characters(codec="ascii", categories=["L", "N", "P", "S"]), min_size=6
    ),
    odd=st.text(min_size=1),
)
def test_captured_files_parse_whatever_the_server_and_the_user_send(name, version, password, odd):
    """Names, server versions and command names with quotes, newlines or control
    characters are escaped (the file always parses), and the password never appears."""
    from urllib.parse import quote

    password = "PW" + password  # never a substring of what the file legitimately holds
    assume(password not in name + version + odd)
    url = f"redis://:{quote(password, safe='')}@h:6379"
    # Unencoded too (?, /, # or @ in it), as a user may type it: nothing of it is shown.
    assert redact.url(f"redis://:{password}@h:6379") == "redis://:***@h:6379"
    lone = password.replace(":", "")  # a lone userinfo with a ':' is user:password
    assert redact.url(f"redis://{lone}@h:6379/0") == "redis://***@h:6379/0"
    observed = capture.Capture(
        url=redact.url(url),
        seconds=1.0,
        version=version,
        calls={"get": 90, "lpush": 9, odd: 1},
    )
    text = capture.workload_text(observed, name)
    parsed = tomllib.loads(text)
    assert parsed["name"] == name
    assert parsed["description"] == "Captured from redis://:***@h:6379"
    assert quote(password, safe="") not in text and password not in text


def test_the_builtin_rotation_gives_a_whole_cycle_one_lockstep_number():
    """Key pattern P: every command of one cycle gets the same number, the next cycle the
    next one (as memtier and regtrack-openloop do: k1 k1 k2 k2, not k1 k2 k2 k3)."""
    spec = LoadSpec(
        clients=1, threads=1, pipeline=1, data_size=1, key_min=1, key_max=100,
        commands=(MixCommand(("SET", "k__key__", "__data__"), 1, "P"),
                  MixCommand(("GET", "k__key__"), 1, "P")),
    )  # fmt: skip
    rotation = _Rotation(spec, 0, 1, random.Random(0))
    keys = [rotation.next()[1][1] for _ in range(6)]
    assert keys == ["k1", "k1", "k2", "k2", "k3", "k3"]
