"""Every number a settings file, workload file or option gives has a finite upper bound
(core/limits.py), checked before any server starts: a pull request's checkout could hang
a run (duration = inf started a server, then crashed with exit 4), grow memory without
end (repetitions = 1e20), switch the gate off ([verdict] throughput_pct = inf) or make
populate build a value of any size. Each bad value is one line (exit 2) naming where it
was written and the range allowed."""

from __future__ import annotations

import math
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regtrack.bench import setup
from regtrack.bench.runtimes.native import native_server
from regtrack.cli.options import Bounded
from regtrack.core.errors import BadInput
from regtrack.core.options import specs
from regtrack.core.settings import RunSettings, Thresholds, load_settings, load_thresholds
from regtrack.workloads import points
from regtrack.workloads.files import load_workload
from tests.conftest import cli_in_process, one_error_line, settings_dir

HUGE = ["inf", "-inf", "nan", "1e20", "1e309", "9223372036854775807"]


def _run(tmp_path: Path, redis_server: str, *args: str, config: Path | None = None):
    head = ["--config", str(config)] if config else []
    return cli_in_process(
        *head, "run", "--versions", f"a=bin:{redis_server}", "--no-report",
        "--db", str(tmp_path / "r.db"), *args,
    )  # fmt: skip


# --- settings files ---------------------------------------------------------------------

BOUNDED_RUN = ["duration", "warmup", "repetitions", "client_bound_cpu_pct",
               "server_bound_cpu_pct", "contention_limit_pct", "server_start_timeout",
               "instruction_requests", "repeatability_pct", "window", "seed_offset",
               "cycle_weight_l1", "cycle_weight_ll", "cycle_weight_branch", "rtt_us"]  # fmt: skip


@pytest.mark.parametrize("field", BOUNDED_RUN)
@pytest.mark.parametrize("value", HUGE)
def test_every_run_setting_refuses_infinite_and_huge_values(tmp_path, field, value):
    path = tmp_path / "regtrack.toml"
    path.write_text(f"[run]\n{field} = {value}\n")
    with pytest.raises(BadInput) as refused:
        load_settings(path)
    line = str(refused.value)
    assert line.startswith(f"{path} [run]: field {field!r}: ") and "\n" not in line
    assert "value <=" in line, "names the range allowed"


def test_every_number_of_the_settings_is_bounded():
    """No numeric setting is left without a bound: each refuses 1e20."""
    numbers = [
        name
        for name, f in RunSettings.model_fields.items()
        if any(k in str(f.annotation) for k in ("int", "float"))
    ]
    assert sorted(numbers) == sorted(BOUNDED_RUN)
    for name in numbers:
        with pytest.raises(ValueError, match="give a"):
            RunSettings(**{name: 1e20})
    for name in Thresholds.model_fields:
        with pytest.raises(ValueError, match=r"0 < value <= 100"):
            Thresholds(**{name: math.inf})


@pytest.mark.parametrize("value", [*HUGE, "101", "0", "-5"])
def test_a_verdict_threshold_outside_0_to_100_is_refused(tmp_path, value):
    """throughput_pct = inf was accepted and no change could cross it: the gate was off."""
    path = tmp_path / "regtrack.toml"
    path.write_text(f"[verdict]\nthroughput_pct = {value}\n")
    with pytest.raises(BadInput, match=r"field 'throughput_pct': .*0 < value <= 100"):
        load_thresholds(None, path)


def test_the_reproductions_through_the_settings_file_stop_before_any_server(
    tmp_path, redis_server, servers_started
):
    for i, (text, words) in enumerate(
        (
            ("[run]\nduration = inf\n", ("[run]", "'duration'", "0 < value <= 3600")),
            ("[run]\nrepetitions = 1e20\n", ("[run]", "'repetitions'", "1 <= value <= 10000")),
            ("[verdict]\nthroughput_pct = inf\n", ("[verdict]", "'throughput_pct'", "<= 100")),
            ("[defaults]\nrepetitions = 1e20\n", ("[defaults]", "repetitions", "<= 10000")),
            ("[defaults.run]\nwindow = nan\n", ("[defaults.run]", "window", "<= 10")),
        )
    ):
        folder = tmp_path / str(i)
        folder.mkdir()
        proc = _run(folder, redis_server, config=settings_dir(folder, text))
        one_error_line(proc, *words)
    assert servers_started == []


# --- options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        ("--duration", "inf", "0 < value <= 3600"),
        ("--duration", "nan", "0 < value <= 3600"),
        ("--warmup", "1e20", "0 <= value <= 600"),
        ("--repetitions", "100000000000000000000", "1 <= value <= 10000"),
        ("--instruction-requests", "1000000000", "2000 <= value <= 10000000"),
        ("--window", "inf", "0.05 <= value <= 10"),
        ("--keys", "1000000000", "1 <= value <= 100000000"),
        ("--data-size", "1073741824", "1 <= value <= 67108864"),
        ("--clients", "100000", "1 <= value <= 10000"),
        ("--pipelines", "1,100000", "1 <= value <= 10000"),
        ("--threshold", "inf", "0 < value <= 100"),
        ("--threshold", "nan", "0 < value <= 100"),
        ("--max-repetitions", "5000", "2 <= value <= 1000"),
    ],
)
def test_an_option_out_of_range_is_one_line_before_any_server(
    tmp_path, redis_server, servers_started, option, value, allowed
):
    proc = _run(tmp_path, redis_server, option, value)
    one_error_line(proc, option, allowed)
    assert servers_started == []


@pytest.mark.parametrize("command", ["compare", "bisect"])
@pytest.mark.parametrize("value", ["inf", "nan", "0", "1e20"])
def test_the_other_commands_verdict_thresholds_are_bounded_too(tmp_path, command, value):
    """compare's and bisect's own --threshold took any float (inf: no change could count)."""
    proc = cli_in_process(command, "--threshold", value, "--db", str(tmp_path / "r.db"))
    one_error_line(proc, "--threshold", "0 < value <= 100")


@settings(max_examples=500, deadline=None)
@given(
    name=st.sampled_from([n for n, s in specs().items() if s.bound is not None]),
    value=st.floats() | st.integers() | st.text(max_size=12) | st.sampled_from(HUGE),
)
def test_any_option_value_is_within_its_bound_or_one_line(name, value):
    spec = specs()[name]
    kind = int if spec.kind == "int" else float
    try:
        converted = Bounded(kind, spec.bound).convert(value, None, None)
    except click.BadParameter as exc:
        assert spec.bound.text() in exc.message and "\n" not in exc.message
    else:
        assert isinstance(converted, kind) and spec.bound.holds(converted), (name, value)


def test_every_numeric_option_has_a_bound():
    for name, spec in specs().items():
        if spec.kind in ("int", "float"):
            assert spec.bound is not None, name


def test_the_options_backed_by_a_setting_allow_what_the_setting_allows():
    """One range each: an option's bound is its setting's, so neither lets through what
    the other refuses."""
    for spec in specs().values():
        if spec.setting is None or spec.bound is None:
            continue
        kind = int if spec.kind == "int" else float
        RunSettings(**{spec.setting: kind(spec.bound.high)})
        with pytest.raises(ValueError, match="give a"):
            RunSettings(**{spec.setting: kind(spec.bound.high) + 1})


# --- workload files ---------------------------------------------------------------------

GET = 'name = "g"\nkind = "get-pipeline"\n'
MIX = 'name = "m"\nkind = "mix"\n[[commands]]\nargs = ["SET", "k:__key__", "__data__"]\n'


@pytest.mark.parametrize(
    ("head", "line", "field"),
    [
        (GET, "keys = 1e20", "keys"),
        (GET, "keys = 1000000000", "keys"),
        (GET, "data_size = 1073741824", "data_size"),
        (GET, "data_size = inf", "data_size"),
        (GET, "clients = 1000000", "clients"),
        (GET, "threads = 100000", "threads"),
        (GET, "pipelines = [1, 1000000]", "pipelines[1]"),
        (GET, f"pipelines = {list(range(1, 200))}", "pipelines"),
        (MIX, "keys = 1e20", "keys"),
        (MIX, "data_size = 1e20", "data_size"),
        (MIX, "tolerance_pct = nan", "tolerance_pct"),
        (MIX, "pipelines = [1e20]", "pipelines[0]"),
    ],
)
def test_a_workload_number_out_of_range_is_one_line_naming_the_field(tmp_path, head, line, field):
    path = tmp_path / "w.toml"
    path.write_text(f"{line}\n{head}")  # top-level lines come before any table
    with pytest.raises(BadInput) as refused:
        load_workload(str(path))
    text = str(refused.value)
    assert text.startswith(f"{path}: field {field!r}: ") and "\n" not in text, text


def test_a_ratio_and_a_process_are_bounded_too(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(MIX + "ratio = 1e20\n")
    with pytest.raises(BadInput, match=r"field 'commands\[0\].ratio': .*<= 10000"):
        load_workload(str(path))
    path.write_text(
        'name = "m"\nkind = "mix"\n[[process]]\nclients = 99999\n[[process.commands]]\n'
        'args = ["GET", "k"]\n'
    )
    with pytest.raises(BadInput, match=r"field 'process\[0\].clients'"):
        load_workload(str(path))


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        ("clients = 5000\nthreads = 4", "20000 connections"),
        ("clients = 1000\npipelines = [1000]\ndata_size = 1048576", "GiB in flight"),
    ],
)
def test_connections_and_bytes_in_flight_are_bounded_together(tmp_path, lines, words):
    """Each within its range, together beyond what Redis accepts (maxclients) or a host
    can buffer."""
    path = tmp_path / "w.toml"
    path.write_text(GET + lines + "\n")
    with pytest.raises(BadInput, match=words):
        load_workload(str(path))


def test_a_workload_out_of_range_stops_the_run_before_any_server(
    tmp_path, redis_server, servers_started
):
    path = tmp_path / "w.toml"
    path.write_text(GET + "data_size = 1e20\n")
    proc = _run(tmp_path, redis_server, "--workload", str(path))
    one_error_line(proc, str(path), "'data_size'", "1 <= value <= 67108864")
    assert servers_started == []


def test_memtier_threads_for_client_cpus_stay_within_maxclients():
    """A GET sweep under memtier gets a thread per client CPU, each with ``clients``
    connections: never more than Redis accepts (6,000 clients on 4 CPUs was 24,000)."""
    wide = load_workload("get-pipeline", clients=6000)
    assert points.with_loadgen_threads(wide, "memtier", 4).threads == 1
    assert points.with_loadgen_threads(load_workload("get-pipeline"), "memtier", 4).threads == 4


def test_the_presets_are_within_every_bound():
    for path in sorted((Path(__file__).parent.parent / "configs" / "workloads").glob("*.toml")):
        load_workload(str(path))
    load_settings(Path(__file__).parent.parent / "configs" / "regtrack.toml")


def test_populate_sends_large_values_in_batches_within_its_byte_budget(redis_server, monkeypatch):
    """populate used to queue 20,000 values before reading a reply, whatever their size
    (20,000 x 64 MiB): batches now hold at most BATCH_BYTES of values, or one."""
    monkeypatch.setattr(setup, "BATCH_BYTES", 10_000)
    workload = load_workload("get-pipeline", keys=50, data_size=4096, pipelines=[1])
    with native_server(redis_server, (0,)) as server:
        client = server.client()
        try:
            setup.prepare_server(client, workload, "memtier")
            calls = client.info("commandstats")["cmdstat_mset"]["calls"]
            assert calls == 25, "two 4096-byte values fit in 10,000 bytes: 25 MSETs for 50 keys"
            assert client.dbsize() == 50 and client.strlen("key:50") == 4096
        finally:
            client.close()
