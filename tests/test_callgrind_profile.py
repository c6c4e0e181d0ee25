"""The callgrind format reader, on the manual's example and on a real profile."""

import shutil
import subprocess

import pytest

from regtrack.bench.callgrind.profile import parse

# The example of the valgrind manual's "Callgrind Format Specification", with name
# compression and relative positions added as callgrind writes them.
EXAMPLE = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 820

ob=(1) /bin/prog
fl=(1) file1.c
fn=(1) main
16 20
cfn=(2) func1
calls=1 50
+0 400
cfi=(2) file2.c
cfn=(3) func2
calls=3 20
* 400

fn=(2)
51 100
cfi=(2)
cfn=(3)
calls=2 20
+0 300

fl=(2)
fn=(3)
20 700

totals: 820
"""


def test_exclusive_and_inclusive_costs_follow_the_manual(tmp_path):
    path = tmp_path / "callgrind.out"
    path.write_text(EXAMPLE)
    profile = parse(path)
    assert profile.instructions == 820
    costs = {c.key: (c.exclusive, c.inclusive) for c in profile.by_key().values()}
    assert costs == {"main": (20, 820), "func1": (100, 400), "func2": (700, 700)}
    assert profile.by_key()["func2"].file == "file2.c"
    assert sum(e for e, _ in costs.values()) == profile.instructions


def test_summary_is_used_when_totals_are_missing(tmp_path):
    path = tmp_path / "callgrind.out"
    path.write_text(EXAMPLE.replace("totals: 820\n", ""))
    assert parse(path).instructions == 820


def test_a_real_profile_adds_up(tmp_path):
    valgrind = shutil.which("valgrind")
    if not valgrind:
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    out = tmp_path / "cg.out"
    subprocess.run(
        [valgrind, "--tool=callgrind", "--quiet", f"--callgrind-out-file={out}", "/bin/ls", "/"],
        check=True,
        capture_output=True,
    )
    profile = parse(out)
    functions = profile.by_key()
    assert profile.instructions > 10_000
    assert sum(f.exclusive for f in functions.values()) == profile.instructions
    assert any("malloc" in name for name in functions), "libc symbols are named"
    assert all(f.inclusive >= f.exclusive for f in functions.values())
