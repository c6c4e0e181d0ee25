"""Files regtrack writes where it is pointed never go through a link it did not make, and
under CI a database inside the checkout is refused (regtrack/core/writes.py): a pull
request's checkout can commit links and a forged database (issue 45, items 1 and 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from regtrack.core import writes
from regtrack.core.errors import BadInput
from tests.conftest import cli_in_process


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """A pull request's checkout as the working directory, and a file outside it that
    links in the checkout point at."""
    root = tmp_path / "checkout"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _outside(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text("keep me\n")
    return victim


def test_a_link_at_the_name_is_refused_and_its_target_untouched(checkout, tmp_path):
    victim = _outside(tmp_path)
    (checkout / "regtrack.json").symlink_to(victim)
    for write in (writes.replace_text, writes.append_text):
        with pytest.raises(BadInput, match=r"regtrack\.json is a symbolic link"):
            write("regtrack.json", "{}", "JSON file")
    assert victim.read_text() == "keep me\n"
    assert (checkout / "regtrack.json").is_symlink()


def test_a_folder_link_in_the_checkout_is_refused(checkout, tmp_path):
    victim = _outside(tmp_path)
    (checkout / "reports").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(BadInput, match=r"goes through the symbolic link .*reports"):
        writes.replace_text("reports/index.html", "<p>", "report page")
    with pytest.raises(BadInput, match="symbolic link"):
        writes.make_dirs("reports/sub", "report folder")
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim.txt"]


def test_the_machines_own_folder_links_are_followed(checkout, tmp_path):
    """A link outside the checkout, made by root or this user in a folder no one else
    writes to (``/var/run`` -> ``/run``), is the machine's layout."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    os.chmod(tmp_path, 0o755)
    written = writes.replace_text(tmp_path / "alias" / "out.json", "{}", "JSON file")
    assert (real / "out.json").read_text() == "{}" and written.parent.name == "alias"
    assert oct((real / "out.json").stat().st_mode & 0o777) == "0o644"


def test_a_link_where_others_may_write_is_refused(checkout, tmp_path):
    """A link in /tmp (world-writable, sticky) may be another local user's."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = _outside(tmp_path)
    (shared / "out").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(BadInput, match="did not make"):
        writes.replace_text(shared / "out" / "x.json", "{}", "JSON file")


def test_append_refuses_a_planted_fifo_without_blocking(checkout):
    os.mkfifo("summary.md")
    with pytest.raises(BadInput, match=r"not a regular file|No such device"):
        writes.append_text("summary.md", "x", "summary")


def test_append_adds_and_replace_replaces(checkout):
    writes.append_text("s.md", "a", "summary")
    writes.append_text("s.md", "b", "summary")
    assert Path("s.md").read_text() == "ab"
    writes.replace_text("s.md", "c", "summary")
    assert Path("s.md").read_text() == "c"
    assert [p.name for p in checkout.iterdir()] == ["s.md"], "no temporary file left"


@pytest.mark.parametrize("ci", ["true", ""])
def test_under_ci_a_database_in_the_checkout_is_refused(checkout, tmp_path, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    outside = tmp_path / "runner-temp" / "regtrack.db"
    assert writes.database_path(outside) == outside
    if ci:
        with pytest.raises(BadInput, match=r"inside the checkout .*RUNNER_TEMP"):
            writes.database_path("reports/regtrack.db")
        monkeypatch.chdir(tmp_path)  # $GITHUB_WORKSPACE is the checkout too
        monkeypatch.setenv("GITHUB_WORKSPACE", str(checkout))
        with pytest.raises(BadInput, match="inside the checkout"):
            writes.database_path(checkout / "reports" / "regtrack.db")
    else:
        assert writes.database_path("reports/regtrack.db") == checkout / "reports/regtrack.db"


def test_a_linked_journal_file_is_refused(checkout, tmp_path):
    victim = _outside(tmp_path)
    Path("r.db-wal").symlink_to(victim)
    with pytest.raises(BadInput, match="wal file is a symbolic link"):
        writes.database_path("r.db")


def test_compare_refuses_a_database_in_the_checkout_under_ci(checkout, tmp_path):
    """The command line says it in one line, exit 2, before reading the file."""
    Path("reports").mkdir()
    Path("reports/regtrack.db").write_bytes(b"forged")
    proc = cli_in_process("compare", cwd=checkout, env={"CI": "true"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "inside the checkout" in line and "--db" in line
    assert Path("reports/regtrack.db").read_bytes() == b"forged"
