"""Version specs, labels and workload files are untrusted: whatever they hold, parsing either
accepts them or raises BadInput (one line, exit 2), never another exception."""

from __future__ import annotations

import copy
import json
import math
import re
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regtrack.core.errors import BadInput
from regtrack.core.settings import load_settings, load_thresholds
from regtrack.output import bisect_text
from regtrack.output.report import bisect_page
from regtrack.results import bisections
from regtrack.results.store import Store
from regtrack.targets import versions
from regtrack.workloads.files import load_workload
from tests.answers import BISECTION
from tests.conftest import cli_in_process

PRESETS = sorted((Path(__file__).parent.parent / "configs" / "workloads").glob("*.toml"))
SPEC_ALPHABET = string.ascii_letters + string.digits + "=:,./-_+~^@{}[]<>'\"`$;&|\\ \t\n\x00\x7f"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=SPEC_ALPHABET, max_size=80) | st.text(max_size=40))
def test_any_version_text_parses_or_is_bad_input(text):
    try:
        specs = versions.parse_specs(text)
    except BadInput as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    for spec in specs:
        assert spec.kind in ("git", "bin", "src", "image", "range")
        assert spec.label and spec.value
        if spec.kind == "git":
            # What reaches git as an argv: never an option, never a range or a path escape.
            assert not spec.value.startswith("-") and ".." not in spec.value


# Numbers with no business in a benchmark: infinite, not a number, or beyond any bound
# (core/limits.py). A file holding them loads only if they were refused or left out.
HUGE_VALUES = ["inf", "-inf", "nan", "1e20", "9223372036854775807", "100000000000",
               "[1e20]", "[100000000]", "[1, inf]"]  # fmt: skip
VALUES = ['""', "0", "-1", "1e309", "[]", '["__data__x"]', "true", '"7.0.99"', "{}", *HUGE_VALUES]
# The largest bound of any number a file may give (a seed offset: 2^31).
LARGEST = 2**31


def _numbers(value):
    """Every int or float inside a model's dump (bools are flags, not numbers)."""
    if isinstance(value, dict):
        for inner in value.values():
            yield from _numbers(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _numbers(inner)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value


def _bounded(model) -> None:
    for number in _numbers(model.model_dump()):
        assert math.isfinite(number) and abs(number) <= LARGEST, (number, model)
    for field in ("throughput", "latency", "instructions", "syscalls"):
        assert getattr(model, field, 1) <= 100, "a threshold past 100% gates nothing"


def _mutate(text: str, data) -> str:
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(st.sampled_from(["drop", "dup", "value", "key", "junk"]))
        line = lines[i]
        if how == "drop":
            del lines[i]
        elif how == "dup":
            lines.insert(i, line)
        elif how == "value" and "=" in line:
            key = line.split("=", 1)[0]
            value = data.draw(
                st.sampled_from(VALUES)
                | st.text(max_size=12).map(
                    lambda t: '"' + t.replace('"', "").replace("\\", "") + '"'
                )
            )
            lines[i] = f"{key}= {value}"
        elif how == "key" and "=" in line:
            lines[i] = data.draw(st.sampled_from(["colour", "ratio", "args", "kind", "name"]))
            lines[i] += " =" + line.split("=", 1)[1]
        else:
            lines[i] = data.draw(st.text(max_size=30))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_mutation_of_a_workload_file_loads_or_is_bad_input(tmp_path, preset, data):
    path = tmp_path / "w.toml"
    path.write_text(_mutate(preset.read_text(), data))
    try:
        workload = load_workload(str(path))
    except BadInput as exc:
        message = str(exc)
        assert message.startswith(str(path)) and "\n" not in message, message
    else:
        _bounded(workload)


@pytest.mark.parametrize("kind", ["[]", "{}", "3", "true", '"Mix"'])
def test_a_workload_kind_of_any_type_is_bad_input(tmp_path, kind):
    # Found by the property test above: kind = [] raised "unhashable type: 'list'".
    path = tmp_path / "w.toml"
    path.write_text(f'name = "w"\nkind = {kind}\n')
    with pytest.raises(BadInput, match="field 'kind'"):
        load_workload(str(path))


@pytest.mark.parametrize(
    "spec",
    [
        "--upload-pack=touch /tmp/pwned",
        "a=$(touch /tmp/pwned)",
        "x;rm -rf /",
        "7.0...8.0",
        "evil=bin:",
        "<script>=7.0",
        "a=7.0,a=7.2",
        "bad\x07label=7.0",
    ],
)
def test_hostile_specs_on_the_command_line_are_one_line_and_exit_2(tmp_path, spec):
    proc = cli_in_process("run", "--versions", spec, "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("regtrack: error: ") and proc.stderr.count("\n") == 1
    assert not Path("/tmp/pwned").exists()


SETTINGS = Path(__file__).parent.parent / "configs" / "regtrack.toml"


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_mutation_of_the_settings_file_loads_or_is_bad_input(tmp_path, data):
    path = tmp_path / "regtrack.toml"
    path.write_text(_mutate(SETTINGS.read_text(), data))
    _bounded_or_one_line(path, [load_settings, lambda p: load_thresholds(None, p)])


def _bounded_or_one_line(path: Path, loaders: list) -> None:
    """Each loader reads ``path`` within every bound, or refuses it in one line naming it."""
    for load in loaders:
        try:
            loaded = load(path)
        except BadInput as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc), str(exc)
        else:
            _bounded(loaded)


NUMBER_LINE = re.compile(r"^\s*[a-z_]+\s*=\s*[-0-9\[]")
NUMBERS = (
    st.sampled_from(HUGE_VALUES)
    | st.floats().map(repr)  # inf, -inf and nan are TOML too
    | st.integers(-(2**63), 2**63 - 1).map(str)
    | st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3).map(str)
)


def _renumber(text: str, data) -> str:
    """``text`` with the value of one of its number lines replaced by any number."""
    lines = text.splitlines()
    numbered = [i for i, line in enumerate(lines) if NUMBER_LINE.match(line)]
    i = data.draw(st.sampled_from(numbered))
    lines[i] = lines[i].split("=", 1)[0] + "= " + data.draw(NUMBERS)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("path", [*PRESETS, SETTINGS], ids=lambda p: p.stem)
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_number_in_a_file_is_within_its_bound_or_one_line(tmp_path, path, data):
    """Every number line of the presets and the settings file, given any number: it loads
    within its bound (core/limits.py), or is refused in one line naming the file."""
    mutated = tmp_path / path.name
    mutated.write_text(_renumber(path.read_text(), data))
    loaders = (
        [load_settings, lambda p: load_thresholds(None, p)]
        if path == SETTINGS
        else [lambda p: load_workload(str(p))]
    )
    _bounded_or_one_line(mutated, loaders)


def _thresholds(path: Path) -> object:
    return load_thresholds(None, path)


@pytest.mark.parametrize(
    ("text", "reads", "ignores"),
    [
        ("run = 3\n", load_settings, _thresholds),
        ('run = "fast"\n', load_settings, _thresholds),
        ("verdict = []\n", _thresholds, load_settings),
    ],
)
def test_settings_sections_of_the_wrong_type_are_bad_input(tmp_path, text, reads, ignores):
    """The loader that reads the section refuses it in one line; the other one, which
    reads another section of the same file, is not disturbed."""
    path = tmp_path / "regtrack.toml"
    path.write_text(text)
    section = text.split(" ")[0]
    with pytest.raises(BadInput, match=rf"\[{section}\] is not a table"):
        reads(path)
    ignores(path)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value, path=()):
    yield path
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, inner in items:
        yield from _paths(inner, (*path, key))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_edit_of_a_stored_bisection_renders_or_is_bad_input(data):
    """A bisection in a database edited by hand (any value, anywhere, replaced or removed):
    its text, its JSON and its report page are made, or it is one line of bad input."""
    stored = copy.deepcopy({k: BISECTION[k] for k in ("config", "log", "result")})
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(stored))[1:]))
        parent = stored
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(JSON_VALUES)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "r.db")
        with store.transaction() as conn:
            conn.execute(
                "INSERT INTO bisections (created_at, status, config, log, result)"
                " VALUES ('today', 'done', ?, ?, ?)",
                tuple(json.dumps(stored.get(k)) for k in ("config", "log", "result")),
            )
        try:
            bisection = bisections.get(store, 1)
            bisect_text.render(bisection)
            bisect_text.render(bisection, "json")
            bisect_page.page(bisection)
        except BadInput as exc:
            assert str(exc) and "\n" not in str(exc)
        finally:
            store.close()
