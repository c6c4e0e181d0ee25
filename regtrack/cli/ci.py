"""`regtrack ci`: did the candidate make the workload slower? Exit 1 on a real regression."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from regtrack.cli.options import EXIT_CODES_HELP, cli, measuring, staged, threshold_option
from regtrack.core.errors import EXIT_REGRESSION, EXIT_SHARD_ONLY, BadInput, CannotMeasure
from regtrack.core.options import Options

if TYPE_CHECKING:
    from regtrack.flows.ci_gate import GateRun


@cli.command(
    epilog=EXIT_CODES_HELP,
    renamed={"--baseline": "--baseline-version", "--candidate": "--candidate-version",
             "--baseline-run": "--baseline-name"},
)  # fmt: skip
@staged(
    "versions",
    "--baseline-version",
    "baseline_spec",
    metavar="SPEC",
    help="Baseline version spec, measured alongside.",
)
@staged(
    "versions",
    "--candidate-version",
    "candidate_spec",
    metavar="SPEC",
    help="Candidate version spec.",
)
@staged(
    "versions",
    "--baseline-name",
    metavar="NAME",
    help="Compare with a stored baseline (regtrack baseline save NAME).",
)
@staged(
    "statistics",
    "--force",
    is_flag=True,
    help="Compare with a stored baseline measured differently.",
)
@threshold_option("ci")
@staged(
    "statistics",
    "--fail-on-inconclusive",
    is_flag=True,
    help="Exit 1 when the gate cannot be decided.",
)
@staged(
    "statistics",
    "--merge",
    "merge_shards",
    is_flag=True,
    help="Decide on shards measured elsewhere (ci --shard K/N): merge the SHARD_DBS into "
    "--db and decide once on all their blocks; measures nothing.",
)
@staged(
    "output",
    "--summary",
    type=click.Path(dir_okay=False),
    help="Write the Markdown summary to this file (replacing it; --append adds to it).",
)
@staged("output", "--append", is_flag=True, help="--summary adds to the file instead.")
@staged("output", "--json", "json_out", type=click.Path(dir_okay=False), help="Write JSON records.")
@click.argument("shard_dbs", nargs=-1, type=click.Path(path_type=Path))
@measuring("ci")
def ci(
    baseline_spec: str | None,
    candidate_spec: str | None,
    baseline_name: str | None,
    force: bool,
    threshold: float | None,
    fail_on_inconclusive: bool,
    merge_shards: bool,
    summary: str | None,
    append: bool,
    json_out: str | None,
    shard_dbs: tuple[Path, ...],
    options: Options,
) -> None:
    """Did CANDIDATE make the workload slower than BASELINE? Exit 1 on a real regression.

    By default both are measured here, interleaved and seed-matched, in blocks of two
    repetitions (A B, B A) until the pooled answer of each gating metric is decided or
    --budget runs out. With --baseline-name, the candidate is compared with a stored
    baseline, only if both were measured alike: same machine, runtime, CPUs, load
    generator and workload settings (regtrack.results.comparability).
    """
    from regtrack.core import writes
    from regtrack.core.settings import load_thresholds

    thresholds = load_thresholds(threshold)
    for path, what in ((summary, "summary"), (json_out, "JSON file")):
        if path:  # refused now, not after the measuring: no link regtrack did not make
            writes.checked(path, what)
    if merge_shards or shard_dbs:
        asked = (baseline_spec, candidate_spec, baseline_name)
        gate = _merged_gate(merge_shards, shard_dbs, options.db, thresholds, asked)
    else:
        gate = _measured_gate(
            baseline_spec, candidate_spec, baseline_name, force, thresholds, options
        )
    _present(gate, (summary, append), json_out, fail_on_inconclusive, options.report)


def _merged_gate(
    merge_shards: bool,
    shard_dbs: tuple[Path, ...],
    db: str | None,
    thresholds: Any,
    measured: tuple[str | None, ...],
) -> GateRun:
    """`ci --merge SHARD_DBS`: union the shards into --db, then decide on the merged run."""
    from regtrack.core.settings import load_settings
    from regtrack.flows import ci_gate, shard_merge
    from regtrack.output import merge_text
    from regtrack.output.console import err
    from regtrack.results.store import Store

    if not (merge_shards and shard_dbs):
        raise BadInput("give --merge and the shards' databases: ci --merge --db OUT.db A.db B.db")
    if any(measured):
        raise BadInput(
            "--merge decides on the shards' own versions: leave out --baseline-version, "
            "--candidate-version and --baseline-name"
        )
    out = Path(db or load_settings().database)
    results = shard_merge.merge(out, list(shard_dbs))
    err.print(merge_text.render(results, out), highlight=False, soft_wrap=True)
    if len(results) != 1:
        raise BadInput(f"the shards measured {len(results)} plans: a gate decides on one")
    return ci_gate.decide_merged(Store.open(out, create=False), results[0].run_id, thresholds)


def _measured_gate(
    baseline_spec: str | None,
    candidate_spec: str | None,
    baseline_name: str | None,
    force: bool,
    thresholds: Any,
    options: Options,
) -> GateRun:
    """Measure the gate here, or this host's shard of it: then nothing is decided, which
    the first line says and exit code 5 tells a script (never 0, as if it had passed)."""
    from regtrack.bench.prepare import latency_plan
    from regtrack.cli.steps import measuring, prepare, say
    from regtrack.flows import ci_gate
    from regtrack.output.console import run_progress

    if not candidate_spec:
        raise BadInput("give --candidate-version SPEC (or --merge with the shards' databases)")
    if bool(baseline_spec) == bool(baseline_name):
        raise BadInput(
            "give exactly one of --baseline-version SPEC (measured now) or --baseline-name NAME"
        )
    stored = (
        ci_gate.stored_baseline(options.db, baseline_name, latency_plan(options))
        if baseline_name
        else None
    )
    if stored is not None:  # its repetitions' seeds, so the blocks pair seed by seed
        options = dataclasses.replace(options, seed_offset=stored.run.seed_offset)
    job = prepare(ci_gate.specs(baseline_spec, candidate_spec), options)
    gate = ci_gate.run(
        job,
        measuring(),
        stored,
        thresholds,
        force,
        options.budget,
        options.max_repetitions,
        options.db,
        say,
        run_progress,
        wait=not options.no_wait,
    )
    if job.shard is not None:
        gate.run.require_complete()
        click.echo(
            f"## regtrack: ⏸️ Shard {job.shard.label} measured, nothing decided (shard from "
            f"{job.shard.source}): run {gate.run_id} of {gate.store.path} holds its blocks; "
            "decide on every shard's database with: regtrack ci --merge --db OUT.db SHARD.db..."
        )
        sys.exit(EXIT_SHARD_ONLY)
    return gate


def _present(
    gate: GateRun,
    summary: tuple[str | None, bool],
    json_out: str | None,
    fail_on_inconclusive: bool,
    report: bool,
) -> None:
    """The decision, everywhere it is read: stdout, step summary, JSON, report; exit code."""
    from regtrack.cli.steps import auto_report
    from regtrack.core import writes
    from regtrack.output import ci_summary

    decision = gate.decision
    text = ci_summary.ci_summary(gate.result, decision, gate.context)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in ci_summary.ci_annotations(decision, gate.context.forced):
            click.echo(line)
    click.echo(text)
    # --summary replaces its file unless --append; GitHub's step summary is one file per
    # step, which other steps may have written to: always added to.
    path, append = summary
    if path:
        write = writes.append_text if append else writes.replace_text
        write(path, text, "summary")
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        writes.append_text(os.environ["GITHUB_STEP_SUMMARY"], text, "step summary")
    if json_out:
        records = ci_summary.ci_json(gate.result, decision, gate.context)
        writes.replace_text(json_out, json.dumps(records, indent=2), "JSON file")
    if report:
        auto_report(gate.store, gate.run_id)
    if decision.outcome != "regression":
        gate.run.require_complete()
    if decision.outcome == "not measured":
        raise CannotMeasure("no gating metric had valid trials on both sides; see the summary")
    if decision.outcome == "regression" or (
        fail_on_inconclusive and decision.outcome == "inconclusive"
    ):
        sys.exit(EXIT_REGRESSION)
