"""A source repository's token reaches git through its environment, never a command line
(every local user reads /proc/PID/cmdline) and never a file: not the mirror, not a clone
interrupted by a signal or killed, not a credential store the user's git config names.
Tried against a real git HTTP server on loopback that requires basic auth."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from regtrack.core.errors import BadInput
from regtrack.targets.sources import SourceRepo
from tests.conftest import finish, start_cli
from tests.gitserver import AuthGitServer, command_lines, files_holding

TOKEN = "tok3n-4e7f1c0b"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("REGTRACK_CACHE", str(path))
    return path


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A HOME whose git config stores every credential it is told succeeded."""
    path = tmp_path / "home"
    path.mkdir()
    (path / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return path


@pytest.fixture
def served(tmp_path):
    server = AuthGitServer(tmp_path / "origin", "ci", TOKEN)
    yield server
    server.close()


def _git_lines_while_held(server: AuthGitServer, held: threading.Event) -> dict[int, str]:
    """Every command line on the machine while git waits for the held request."""
    assert held.wait(60), "git never asked for the refs"
    return command_lines()


def _assert_token_on_no_command_line(lines: dict[int, str], server: AuthGitServer) -> None:
    leaked = [line for line in lines.values() if TOKEN in line]
    assert not leaked, leaked
    # The guard sees git's command lines: the URL is on them, without the userinfo.
    address = f"127.0.0.1:{server.port}"
    assert any(address in line and "git" in line for line in lines.values()), lines


def _in_thread(function) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            function()
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize(
    ("userinfo", "user", "password"),
    [
        (f"ci:{TOKEN}", "ci", TOKEN),
        (TOKEN, TOKEN, ""),  # a lone token is the user name, as GitHub takes it
        (f"ci:{TOKEN.replace('-', '%2D')}", "ci", TOKEN),  # percent-encoded, as git reads it
    ],
)
def test_a_token_reaches_git_through_a_helper_on_clone_and_fetch(
    tmp_path, cache, home, userinfo, user, password
):
    """While the clone and later the fetch wait on the server, no process's command line
    holds the token; both succeed with it; the mirror, the cache and the user's
    credential store hold it nowhere."""
    server = AuthGitServer(tmp_path / "origin", user, password)
    try:
        stored = home / ".git-credentials"
        if password:  # git keeps a URL's user:password with the user's `store` helper
            control = subprocess.run(
                ["git", "clone", "-q", "--mirror", server.url(userinfo), str(tmp_path / "c")],
                capture_output=True, text=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            )  # fmt: skip
            assert control.returncode == 0, control.stderr
            assert stored.is_file() and TOKEN in stored.read_text().replace("%2D", "-")
            stored.unlink()

        repo = SourceRepo(server.url(userinfo))
        with server.holding() as held:
            thread, errors = _in_thread(repo.ensure_clone)
            lines = _git_lines_while_held(server, held)
        thread.join(60)
        assert not errors, errors
        _assert_token_on_no_command_line(lines, server)
        assert repo.resolve("1.0.0").commit == server.commits["1.0.0"]

        server.publish("1.2.0", server.commits["1.2.0"])
        served_before = len(server.served)
        again = SourceRepo(server.url(userinfo))  # a later run: its first unknown tag fetches
        with server.holding() as held:
            thread, errors = _in_thread(lambda: again.resolve("1.2.0"))
            lines = _git_lines_while_held(server, held)
        thread.join(60)
        assert not errors, errors
        _assert_token_on_no_command_line(lines, server)
        assert len(server.served) > served_before, "the fetch was answered with the token"
        assert again.resolve("1.2").commit == server.commits["1.2.0"]

        assert not files_holding(cache, TOKEN) and not files_holding(home, TOKEN)
        assert not stored.exists(), "git was not told to store the credential"
        assert server.refused >= 1, "the server asks for credentials (the test needs it)"
    finally:
        server.close()


def test_without_the_token_the_server_refuses(tmp_path, cache, served):
    """The server really checks: a URL without the token cannot clone."""
    from regtrack.core.errors import CannotMeasure

    with pytest.raises(CannotMeasure, match="cannot get the source repository"):
        SourceRepo(served.url("ci:wrong")).ensure_clone()
    assert not list((cache / "repos").iterdir())


def _through_environment(cache: Path, url: str) -> dict[str, str]:
    """The CLI's environment: the URL in REGTRACK_SOURCE_REPO, so that regtrack's own
    command line does not hold it either (as docs/usage.md advises)."""
    return {"REGTRACK_CACHE": str(cache), "REGTRACK_SOURCE_REPO": url}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_clone_leaves_nothing_behind(tmp_path, cache, served, sig):
    """regtrack stopped mid-clone (Ctrl-C, SIGTERM) used to leave
    repos/NAME.git.tmpPID/config holding the URL with its token, mode 0644."""
    with served.holding() as held:
        proc = start_cli("run", "--versions", "1.0.0", "--db", str(tmp_path / "r.db"),
                         env=_through_environment(cache, served.url(f"ci:{TOKEN}")))  # fmt: skip
        lines = _git_lines_while_held(served, held)
        clones = list((cache / "repos").glob("*.tmp*"))
        proc.send_signal(sig)
        out, err = finish(proc, 60)
    _assert_token_on_no_command_line(lines, served)
    assert clones, "the clone's temporary directory existed while it ran"
    assert proc.returncode == 130, err
    assert TOKEN not in out + err
    assert not list((cache / "repos").glob("*.tmp*")), list((cache / "repos").iterdir())
    assert not files_holding(cache, TOKEN)


def _wait_gone(port: int, what: str = "", timeout: float = 10) -> None:
    """Until no process whose command line holds ``what`` talks to the server."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [line for line in command_lines().values() if f"127.0.0.1:{port}" in line]
        if not [line for line in lines if what in line]:
            return
        time.sleep(0.05)
    raise AssertionError(f"still running after regtrack was killed: {lines}")


def test_a_clone_killed_with_sigkill_leaves_no_token_and_the_next_clone_removes_it(
    tmp_path, cache, served
):
    """kill -9 leaves the temporary directory (nothing runs to remove it): it holds no
    credential, its git is killed with regtrack, and the next clone removes it."""
    url = served.url(f"ci:{TOKEN}")
    with served.holding() as held:
        proc = start_cli("run", "--versions", "1.0.0", "--db", str(tmp_path / "r.db"),
                         env=_through_environment(cache, url))  # fmt: skip
        assert held.wait(60)
        proc.kill()
        finish(proc, 30)
        _wait_gone(served.port, "clone --mirror")  # git dies with regtrack, mid-request
    _wait_gone(served.port)  # git-remote-http, orphaned, ends as it answers its dead git
    left = list((cache / "repos").glob(f"*.tmp{proc.pid}"))
    assert left, "kill -9 leaves the clone's directory (the guard below must see it)"
    assert not files_holding(cache, TOKEN)
    repo = SourceRepo(url)
    repo.ensure_clone()
    assert repo.resolve("1.1.0").commit == served.commits["1.1.0"]
    assert not list((cache / "repos").glob("*.tmp*"))


def test_a_token_in_a_query_string_is_refused_before_git_runs(cache):
    """git hands the whole URL to git-remote-http on its command line: a query string's
    token cannot be kept off it, so such a URL is refused (the userinfo form works)."""
    repo = SourceRepo(f"https://git.example.invalid/r.git?private_token={TOKEN}")
    with pytest.raises(BadInput, match="query string") as refused:
        repo.ensure_clone()
    assert TOKEN not in str(refused.value)
    assert not (cache / "repos").exists() or not list((cache / "repos").iterdir())
