"""`regtrack ci`'s decisions end to end, in process, on modelled trials (tests/fakebench.py):
A/A, undecided gates, blocks added until decided, stored baselines measured alike or not.
The real gate on real builds is test_ci.py."""

from __future__ import annotations

import csv
import io
import json
import sqlite3

import pytest

from tests import fakebench
from tests.conftest import cli_in_process, settings_dir

TPUT = ["--pipelines", "10", "--repetitions", "2", "--no-report"]


@pytest.fixture
def pair(redis_server) -> list[str]:
    server = f"bin:{redis_server}"
    return ["--baseline-version", f"a={server}", "--candidate-version", f"b={server}"]


def _records(path) -> dict:
    return json.loads(path.read_text())


def test_an_a_a_comparison_is_decided_no_change(tmp_path, monkeypatch, pair):
    """Seed-matched counts of one build agree within ~0.05%: the first look (4 repetitions)
    bounds them far inside the 1% threshold, but "no change" waits for 8 seeds (a change
    can live in a few seeds); the summary said so before it was decided."""
    model = fakebench.Model()
    out = tmp_path / "r.json"
    proc = cli_in_process(
        "ci", *pair, "--metric", "instructions", "--pipelines", "10",
        "--db", str(tmp_path / "r.db"), "--json", str(out), "--no-report", measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("## regtrack: ✅ No regression after 8 repetitions")
    assert "undecided after 4 repetitions" in proc.stderr, proc.stderr
    data = _records(out)
    assert data["outcome"] == "no regression" and data["decided"]
    gates = {g["metric"]: g for g in data["gate"]}
    assert set(gates) == {"instructions_per_op", "syscalls_per_op"}  # both counted, both gate
    gate = gates["instructions_per_op"]
    assert gate["verdict"] == gates["syscalls_per_op"]["verdict"] == "no change"
    assert gate["ci_high_pct"] - gate["ci_low_pct"] < 0.5
    assert [r["candidate"] for r in data["records"]][:1] == ["b"]


def test_an_undecided_gate_says_so_first_and_warns(tmp_path, monkeypatch, pair):
    """Two repetitions (one block) cannot bound an interval that stays valid under repeated
    looks: the gate is undecided, says so in its first line, and GitHub gets a warning."""
    model = fakebench.Model()
    args = ["ci", *pair, *TPUT, "--max-repetitions", "2", "--metric", "throughput",
            "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "r.json")]  # fmt: skip
    proc = cli_in_process(*args, env={"GITHUB_ACTIONS": "true"}, measuring=model)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith("::warning title=regtrack: undecided::throughput")
    assert second.startswith("## regtrack: ⚠️ Undecided: no regression found, but the gate")
    assert "(--max-repetitions)" in second and "[too wide to read] inconclusive" in second
    assert "detectable" not in second, "no figure for an unbounded interval"
    data = _records(tmp_path / "r.json")
    assert data["outcome"] == "inconclusive" and not data["decided"]
    assert data["stopped"] == "max-repetitions"
    strict = cli_in_process(*args, "--fail-on-inconclusive", measuring=model)
    assert strict.returncode == 1, strict.stderr


def test_blocks_are_added_until_decided_and_a_decided_metric_stops(tmp_path, monkeypatch, pair):
    """Instructions decide once they have the 8 seeds `no change` waits for (seed-matched
    pairs agree) and are never measured again; throughput, 3% noisy against a 0.001%
    threshold, asks for more blocks, and then only throughput is measured in them, until
    --max-repetitions."""
    configs = settings_dir(tmp_path, "[verdict]\nthroughput_pct = 0.001\n")
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    model = fakebench.Model()
    db, out = tmp_path / "r.db", tmp_path / "r.json"
    proc = cli_in_process("ci", *pair, *TPUT, "--repetitions", "4", "--max-repetitions", "10",
                          "--metric", "both", "--db", str(db), "--json", str(out),
                          measuring=model)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = _records(out)
    verdicts = {g["metric"]: g["verdict"] for g in data["gate"]}
    assert verdicts == {
        "instructions_per_op": "no change", "syscalls_per_op": "no change",
        "throughput": "inconclusive",
    }  # fmt: skip
    assert "undecided after 8 repetitions: measuring 2 more (throughput)" in proc.stderr
    reps = {
        mode: sorted({r for _, r, m in model.visits if m == mode}) for _, _, mode in model.visits
    }
    assert reps == {"instructions": list(range(8)), "throughput": list(range(10))}
    assert data["repetitions"] == 10 and data["stopped"] == "max-repetitions"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchone()[0] == "complete"


def test_stored_baseline_needs_a_matching_machine(tmp_path, monkeypatch, redis_server):
    model = fakebench.Model()
    db = tmp_path / "r.db"
    cand = ["--candidate-version", f"new=bin:{redis_server}", *TPUT, "--db", str(db)]
    first = cli_in_process("run", "--versions", f"shipped=bin:{redis_server}", *TPUT,
                           "--db", str(db), measuring=model)  # fmt: skip
    assert first.returncode == 0, first.stderr
    saved = cli_in_process("baseline", "save", "prod", "--run", "1", "--db", str(db))
    assert saved.returncode == 0 and "baseline 'prod' = shipped of run 1" in saved.stdout
    assert "prod" in cli_in_process("baseline", "list", "--db", str(db)).stdout

    ok = cli_in_process(
        "ci", "--baseline-name", "prod", *cand, "--json", str(tmp_path / "r.json"), measuring=model
    )
    data = _records(tmp_path / "r.json")
    assert ok.returncode == (1 if data["outcome"] == "regression" else 0), ok.stderr
    assert data["headline"] in ok.stdout.splitlines()[0]
    (rec,) = [r for r in data["records"] if r["metric"] == "throughput"]
    # The stored run's repetition r and the candidate's share a seed: they pair, and the
    # interval carries the two runs' shifts (no history of one code yet: the default).
    assert rec["method"] == "t-spending" and rec["baseline"] == "shipped"
    assert data["run_shifts"]["throughput"]["sd_pct"] == 5.0
    assert (
        "throughput: across runs (baseline from run 1): each run's shift as a whole, sd "
        "5.00% (default" in ok.stdout
    )
    # ... because the candidate's run took the stored run's seed offset, while a run of
    # its own draws another: rerunning it measures other seeds.
    again = cli_in_process("run", "--versions", f"again=bin:{redis_server}", *TPUT,
                           "--db", str(db), measuring=model)  # fmt: skip
    assert again.returncode == 0, again.stderr
    conn = sqlite3.connect(db)
    offsets = [json.loads(c)["settings"]["seed_offset"]
               for (c,) in conn.execute("SELECT config FROM runs ORDER BY id")]  # fmt: skip
    assert offsets[0] == offsets[1] != offsets[2], offsets
    seeds = [{s for (s,) in conn.execute("SELECT seed FROM trials WHERE run_id = ?", (run,))}
             for run in (1, 2, 3)]  # fmt: skip
    assert seeds[1] <= seeds[0] and not seeds[2] & seeds[0], seeds
    unpaired = cli_in_process("compare", "--run", "3", "--baseline-run", "1", "--baseline",
                              "shipped", "--candidate", "again", "--db", str(db),
                              "--format", "json", measuring=model)  # fmt: skip
    assert unpaired.returncode == 0, unpaired.stderr
    assert {r["method"] for r in json.loads(unpaired.stdout)["records"]} == {"welch-t"}

    # ci's first block is 4 repetitions, but the stored run has 2 to pair with.
    short = cli_in_process("ci", "--baseline-name", "prod", "--candidate-version",
                           f"new=bin:{redis_server}", "--pipelines", "10", "--no-report",
                           "--db", str(db), measuring=model)  # fmt: skip
    assert short.returncode in (0, 1), short.stderr
    (reps,) = (
        sqlite3.connect(db)
        .execute(
            "SELECT COUNT(DISTINCT repetition) FROM trials"
            " WHERE run_id = (SELECT MAX(id) FROM runs)"
        )
        .fetchone()
    )
    assert reps == 2

    # Fault: the stored run says it was measured on a different kernel.
    conn = sqlite3.connect(db)
    key = json.loads(conn.execute("SELECT comparability FROM runs WHERE id = 1").fetchone()[0])
    key["machine.kernel"] = "0.0.0-elsewhere"
    conn.execute("UPDATE runs SET comparability = ? WHERE id = 1", (json.dumps(key),))
    conn.commit()
    refused = cli_in_process("ci", "--baseline-name", "prod", *cand, measuring=model)
    assert refused.returncode == 2
    assert "was not measured like this one (kernel 0.0.0-elsewhere != " in refused.stderr
    runs_before = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    forced = cli_in_process("ci", "--baseline-name", "prod", *cand, "--force",
                            "--json", str(tmp_path / "forced.json"), measuring=model)  # fmt: skip
    outcome = _records(tmp_path / "forced.json")["outcome"]
    assert forced.returncode == (1 if outcome == "regression" else 0), forced.stderr
    assert "(FORCED: not like with like)" in forced.stdout.splitlines()[0]
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == runs_before + 1


def test_a_baseline_measured_with_other_settings_is_refused_unless_forced(
    tmp_path, monkeypatch, redis_server
):
    """A baseline saved from a run with --clients 10 is not like a candidate measured with
    the default 50: ci and compare refuse it with the differences (exit 2, nothing
    measured); with --force they compare and every output says so."""
    model = fakebench.Model()
    db = tmp_path / "r.db"
    first = cli_in_process("run", "--versions", f"shipped=bin:{redis_server}", *TPUT,
                           "--clients", "10", "--db", str(db), measuring=model)  # fmt: skip
    assert first.returncode == 0, first.stderr
    saved = cli_in_process("baseline", "save", "prod", "--run", "1", "--db", str(db))
    assert saved.returncode == 0
    candidate = ["--candidate-version", f"new=bin:{redis_server}"]
    gate = ["ci", "--baseline-name", "prod", *candidate, *TPUT]
    refused = cli_in_process(*gate, "--db", str(db), measuring=model)
    assert refused.returncode == 2, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("regtrack: error: baseline 'prod' was not measured like this one")
    assert "(clients 10 != 50)" in last
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1, "nothing measured"

    out = tmp_path / "ci.json"
    forced = cli_in_process(*gate, "--db", str(db), "--force", "--json", str(out), measuring=model)
    assert forced.returncode == (1 if _records(out)["outcome"] == "regression" else 0)
    assert "(FORCED: not like with like)" in forced.stdout.splitlines()[0]
    assert "FORCED comparison, not like with like: clients 10 != 50" in forced.stdout
    assert _records(out)["forced"] == ["clients 10 != 50"]

    compare = ["compare", "--run", "2", "--baseline-run", "1", "--db", str(db)]
    refused = cli_in_process(*compare)
    assert refused.returncode == 2
    assert "run 1 was not measured like this one (clients 10 != 50)" in refused.stderr
    for fmt in ("table", "markdown"):
        shown = cli_in_process(*compare, "--force", "--format", fmt)
        assert shown.returncode == 0, shown.stderr
        assert "clients 10 != 50" in shown.stdout.splitlines()[0], (fmt, shown.stdout)
    rows = list(csv.DictReader(io.StringIO(cli_in_process(*compare, "--force", "--format",
                                                          "csv").stdout)))  # fmt: skip
    assert rows and all(r["forced"] == "clients 10 != 50" for r in rows), "on every row"
    records = json.loads(cli_in_process(*compare, "--force", "--format", "json").stdout)["records"]
    assert records and all(r["forced"] == ["clients 10 != 50"] for r in records)

    # Server settings are part of what must match: the same clients, another hz.
    other = cli_in_process(
        *gate, "--clients", "10", "--server-config", "hz=25", "--db", str(db), measuring=model
    )
    assert other.returncode == 2, other.stderr
    assert 'not measured like this one (server null != {"hz": "25"})' in other.stderr


def test_compare_json_carries_intervals_and_verdicts(tmp_path, monkeypatch, redis_server):
    model = fakebench.Model()
    db = tmp_path / "r.db"
    proc = cli_in_process("run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}",
                          *TPUT, "--repetitions", "3", "--db", str(db),
                          measuring=model)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(cli_in_process("compare", "--db", str(db), "--format", "json").stdout)[
        "records"
    ]
    (rec,) = [r for r in rows if r["metric"] == "throughput"]
    assert rec["verdict"] in ("no change", "inconclusive")
    assert rec["n_valid"] == 3 and rec["method"] == "t"  # one look: a t interval
    assert rec["ci_low_pct"] <= rec["change_pct"] <= rec["ci_high_pct"]


def test_runs_without_controlled_seeds_compare_and_gate_across_runs(
    tmp_path, monkeypatch, redis_server
):
    """Where seeds cannot be controlled (no unshare: containers without CAP_SYS_ADMIN,
    restricted CI runners; here seeds = "random"), trials carry no seed: a comparison
    with a stored run is unpaired (Welch, one look), and says so; it used to end
    "internal error: UnboundLocalError" (exit 3)."""
    configs = settings_dir(tmp_path, '[run]\nseeds = "random"\n')
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    model = fakebench.Model()
    db = tmp_path / "r.db"
    for label in ("old", "new"):
        proc = cli_in_process("run", "--versions", f"{label}=bin:{redis_server}", *TPUT,
                              "--repetitions", "3", "--db", str(db), measuring=model)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("hash seeds are not controlled (random seeds") == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM trials WHERE seed IS NOT NULL").fetchone() == (0,)
        config = json.loads(conn.execute("SELECT config FROM runs WHERE id = 1").fetchone()[0])
    assert config["seeds"].startswith("not controlled: random seeds")

    shown = cli_in_process("compare", "--run", "2", "--baseline-run", "1", "--db", str(db),
                           "--format", "json", measuring=model)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    (rec,) = [r for r in json.loads(shown.stdout)["records"] if r["metric"] == "throughput"]
    assert rec["method"] == "welch-t" and rec["ci_low_pct"] < rec["change_pct"] < rec["ci_high_pct"]

    out = tmp_path / "ci.json"
    saved = cli_in_process("baseline", "save", "shipped", "--run", "1", "--db", str(db))
    assert saved.returncode == 0, saved.stderr
    gate = cli_in_process(
        "ci", "--baseline-name", "shipped", "--candidate-version", f"c=bin:{redis_server}", *TPUT,
        "--metric", "throughput", "--db", str(db), "--json", str(out), measuring=model,
    )  # fmt: skip
    assert gate.returncode in (0, 1), gate.stderr
    assert "internal error" not in gate.stderr
    data = _records(out)
    (tput,) = [r for r in data["records"] if r["metric"] == "throughput"]
    assert tput["method"] == "welch-t" and tput["baseline"] == "old"


def test_a_no_change_on_too_few_seeds_waits_and_says_why():
    from regtrack.analysis.metrics import METRIC_BY_NAME
    from regtrack.analysis.pooling import seeds_enough
    from regtrack.output.answer_text import change_text
    from tests import answers

    instructions, throughput = METRIC_BY_NAME["instructions_per_op"], METRIC_BY_NAME["throughput"]
    verdict, waits = seeds_enough(instructions, "no change", 4)
    assert (verdict, waits) == ("inconclusive", 8)
    assert seeds_enough(instructions, "no change", 8) == ("no change", None)
    assert seeds_enough(instructions, "regression", 4) == ("regression", None), "need not wait"
    assert seeds_enough(throughput, "no change", 2) == ("no change", None)
    rec = answers.pooled(
        change_pct=0.01, ci_low_pct=-0.2, ci_high_pct=0.2, n_blocks=4, verdict=verdict,
        blocks_for_no_change=waits,
    )  # fmt: skip
    assert change_text(rec).endswith("inconclusive (no change needs 8 seeds, 4 so far)")
