"""A workload file cannot administer the server it is measured on (issue 45): it may be a
pull request's, and redis-server runs as regtrack's user, root in CI. Its [server] table
cannot name a file, a host or another setting (cluster-config-file=/any/path created a
root-owned file there; a value "--dir X" after --save moved the server's directory), its
setup steps and commands cannot send an administrative command (refused when the file is
loaded), and the server refuses them anyway: setup runs as the load generators' user,
which has none of them (on Redis 6.2 too), never as regtrack's administrator."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time

import pytest
import redis

from regtrack.bench import setup
from regtrack.bench.runtimes.base import connect
from regtrack.bench.runtimes.native import native_server
from regtrack.core import procs
from regtrack.core.errors import BadInput
from regtrack.workloads import commands, server_config
from regtrack.workloads.files import load_workload
from regtrack.workloads.model import MixWorkload, SetupStep
from tests.conftest import MAKE_FLAGS, TEST_CACHE, cli_in_process, one_error_line

# Every redis-server directive (6.2, 7.x, 8.x, Valkey 8-9) that names a file or directory,
# loads or enables code, sets a secret or reaches another host.
DIRECTIVES = [
    "dir", "dbfilename", "appendfilename", "appenddirname", "logfile", "pidfile",
    "unixsocket", "unixsocketperm", "unixsocketgroup", "cluster-config-file", "aclfile",
    "include", "loadmodule", "rename-command", "enable-module-command",
    "enable-debug-command", "enable-protected-configs", "syslog-enabled", "syslog-ident",
    "syslog-facility", "tls-port", "tls-cert-file", "tls-key-file", "tls-key-file-pass",
    "tls-client-cert-file", "tls-client-key-file", "tls-client-key-file-pass",
    "tls-dh-params-file", "tls-ca-cert-file", "tls-ca-cert-dir", "replicaof", "slaveof",
    "masterauth", "masteruser", "requirepass", "user", "oom-score-adj",
    "oom-score-adj-values",
]  # fmt: skip


# --- [server] and --server-config -------------------------------------------------------


@pytest.mark.parametrize("name", DIRECTIVES)
def test_no_setting_that_names_a_file_or_runs_code_gets_through(name):
    for text in (f"{name}=/tmp/x", f"{name}?=/tmp/x"):
        with pytest.raises(BadInput) as refused:
            server_config.parse_option(text)
        assert name in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(BadInput, match=re.escape(name)):
        server_config.from_table({name: "/tmp/x"}, "w.toml")


def test_cluster_config_file_in_a_workload_is_refused_and_nothing_is_created(
    tmp_path, redis_server, servers_started
):
    target = tmp_path / "somewhere" / "x.conf"
    path = tmp_path / "w.toml"
    path.write_text(
        f'name = "w"\nkind = "get-pipeline"\n[server]\ncluster-enabled = "yes"\n'
        f'cluster-config-file = "{target}"\n'
    )
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{redis_server}", "--workload", str(path), "--no-report",
        "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    one_error_line(proc, "cluster-config-file names a file")
    assert servers_started == [] and not target.parent.exists()


def test_every_setting_that_names_a_path_on_a_real_server_is_refused(redis_server, tmp_path):
    """The audit, against what a real server says it knows (CONFIG GET *): whatever ends in
    file, dir, filename, dirname or socket*, or holds a password, is refused."""
    pattern = re.compile(r"(file|dir|filename|dirname|socket|socketperm|socketgroup|pass)$")
    with native_server(redis_server, (0,), data_dir=str(tmp_path)) as server:
        client = server.client()
        known = sorted(client.config_get("*"))
        client.close()
    paths = [name for name in known if pattern.search(name)]
    assert {"cluster-config-file", "dbfilename", "dir", "tls-ca-cert-dir"} <= set(paths)
    for name in paths:
        with pytest.raises(BadInput):
            server_config.setting(name, "/tmp/x", "w.toml")


@pytest.mark.parametrize("value", ["--dir /tmp/x", "--loadmodule /tmp/x.so", "-", "--"])
def test_a_value_redis_server_would_read_as_its_own_setting_is_refused(value):
    with pytest.raises(BadInput, match="starts with '-'"):
        server_config.parse_option(f"save={value}")
    assert server_config.parse_option("slowlog-log-slower-than=-1").value == "-1"


def test_redis_server_reads_a_dashed_value_after_save_as_a_setting(redis_server, tmp_path):
    """Why the rule above exists: `--save "--dir X"` moves the server's directory to X
    (7.0.15 here; 6.2 takes any value starting with -- as a setting). With loadmodule in
    place of dir, it would run code as regtrack's user."""
    moved = tmp_path / "moved"
    moved.mkdir()
    port = procs.free_port()
    server = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--save", f"--dir {moved}"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = connect("127.0.0.1", port, timeout=1.0)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    break
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        assert client.config_get("dir")["dir"] == str(moved)
    finally:
        client.close()
        server.kill()
        server.wait()


# --- setup steps and commands -------------------------------------------------------------

MIX = """name = "m"
kind = "mix"
min_redis = "7.0"
extra_commands = ["MODULE"]
[[setup]]
command = {setup}
[[commands]]
args = {command}
"""
HARMLESS = '["SET", "k:__key__", "__data__"]'


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ('["CONFIG", "SET", "dir", "/tmp/x"]', "CONFIG SET"),
        ('["config", "rewrite"]', "CONFIG REWRITE"),
        ('["SAVE"]', "SAVE"),
        ('["BGSAVE"]', "BGSAVE"),
        ('["BGREWRITEAOF"]', "BGREWRITEAOF"),
        ('["MODULE", "LOAD", "/tmp/x.so"]', "MODULE"),
        ('["DEBUG", "RELOAD"]', "DEBUG"),
        ('["ACL", "SETUSER", "default", "+@all"]', "ACL"),
        ('["REPLICAOF", "10.0.0.1", "6379"]', "REPLICAOF"),
        ('["SLAVEOF", "10.0.0.1", "6379"]', "SLAVEOF"),
        ('["SHUTDOWN"]', "SHUTDOWN"),
        ('["MIGRATE", "10.0.0.1", "6379", "k", "0", "5000"]', "MIGRATE"),
        ('["CLUSTER", "SAVECONFIG"]', "CLUSTER SAVECONFIG"),
        ('["CLIENT", "KILL", "TYPE", "normal"]', "CLIENT KILL"),
        ('["FAILOVER"]', "FAILOVER"),
        ('["MONITOR"]', "MONITOR"),
    ],
)
@pytest.mark.parametrize("where", ["setup[0]", "commands[0]"])
def test_an_administrative_command_in_a_workload_is_one_line(tmp_path, args, shown, where):
    """Refused by name whatever extra_commands says (a module's command list is no way in)."""
    setup_args, command_args = (args, HARMLESS) if where == "setup[0]" else (HARMLESS, args)
    name = args.split('"')[1].upper()
    path = tmp_path / "w.toml"
    path.write_text(
        MIX.format(setup=setup_args, command=command_args).replace(
            '["MODULE"]', f'["MODULE", "{name}"]'
        )
    )
    with pytest.raises(BadInput) as refused:
        load_workload(str(path))
    line = str(refused.value)
    assert line.startswith(f"{path}: {where}: {shown} administers the server"), line
    assert "\n" not in line


def test_what_mixes_need_is_not_refused():
    for args in (["CONFIG", "GET", "save"], ["SCRIPT", "LOAD", "return 1"],
                 ["FUNCTION", "LOAD", "#!lua name=x"], ["CLIENT", "SETNAME", "w"],
                 ["CLUSTER", "SLOTS"], ["KEYS", "*"], ["INFO"]):  # fmt: skip
        assert commands.refused(args) is None, args
    for preset in ("streams-queue", "list-queue", "priority-streams", "lua-dispatch"):
        load_workload(preset)


def test_a_setup_step_config_set_dir_stops_the_run_in_one_line(
    tmp_path, redis_server, servers_started
):
    path = tmp_path / "w.toml"
    path.write_text(
        MIX.format(setup=f'["CONFIG", "SET", "dir", "{tmp_path / "x"}"]', command=HARMLESS)
    )
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{redis_server}", "--workload", str(path), "--loadgen",
        "builtin", "--no-report", "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    one_error_line(proc, "setup[0]: CONFIG SET administers the server")
    assert servers_started == []


# --- the server refuses them too: setup runs as the load user ----------------------------


@pytest.fixture(params=["installed", "6.2.14"])
def any_server(request, monkeypatch) -> str:
    """The installed redis-server (7.0.15 here), and 6.2.14 built from the offline sources:
    CONFIG SET dir plus SAVE wrote files as root on 6.x when setup ran as the admin user."""
    if request.param == "installed":
        return request.getfixturevalue("redis_server")
    from regtrack.targets.build import build_commit
    from regtrack.targets.sources import SourceRepo

    monkeypatch.setenv("REGTRACK_CACHE", str(TEST_CACHE))  # the tests' cached builds
    repo = SourceRepo(str(request.getfixturevalue("offline_redis")))
    return build_commit(repo, repo.resolve("6.2.14").commit, MAKE_FLAGS).server


def _unchecked_mix(*steps: list[str]) -> MixWorkload:
    """A mix whose setup got past the load-time check (as a stored run's could): built
    without validation, to try the server's own refusal."""
    return MixWorkload.model_construct(
        name="evil",
        kind="mix",
        data_size=8,
        keys=10,
        setup=[SetupStep.model_construct(command=s, save_as=None, per_key=False) for s in steps],
        commands=[],
        process=[],
    )


def test_setup_runs_as_the_load_user_and_cannot_move_the_servers_files(any_server, tmp_path):
    elsewhere, data = tmp_path / "x", tmp_path / "data"
    elsewhere.mkdir()
    data.mkdir()
    with native_server(any_server, (0,), data_dir=str(data)) as server:
        assert server.access.level in ("acl", "acl-no-channels")
        client = server.client()
        try:
            for step in (["CONFIG", "SET", "dir", str(elsewhere)], ["SAVE"]):
                with pytest.raises(BadInput) as refused:
                    setup.prepare_server(client, _unchecked_mix(step), "builtin")
                line = str(refused.value)
                assert "setup[0]" in line and "no permissions" in line and "\n" not in line, line
            assert client.config_get("dir")["dir"] == server.token_dir
            saved = setup.prepare_server(client, load_workload("priority-streams"), "builtin")
            assert len(saved) == 3 and all(len(sha) == 40 for sha in saved.values())
        finally:
            client.close()
    assert list(elsewhere.iterdir()) == []
