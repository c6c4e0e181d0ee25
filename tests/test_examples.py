"""The scale-out examples in examples/ are usable as they are: they parse, every regtrack
command line in them uses only options regtrack has, and the shard variables they set are
the ones regtrack reads, with counts that agree."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import yaml

from regtrack.bench import shards
from regtrack.cli import cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WORKFLOW = EXAMPLES / "github-actions-shards.yml"
MANIFEST = EXAMPLES / "kubernetes-indexed-job.yaml"


def _commands(script: str) -> list[list[str]]:
    """Each `regtrack ...` invocation of a shell script, as argv after `regtrack`."""
    script = re.sub(r"\$\{\{[^}]*\}\}", "X", script)  # GitHub expressions
    found = []
    for part in re.split(r"&&|\n(?=\S)|;", script):
        words = shlex.split(part.replace("\\\n", " "), comments=True)
        for i, word in enumerate(words):
            if word.endswith("regtrack") or word.endswith("/regtrack"):
                found.append(words[i + 1 :])
                break
    return found


def _check(argv: list[str]) -> click.Command:
    """The regtrack command argv names, every option of it known to that command."""
    ctx = click.Context(cli)
    group: click.Command = cli
    words = list(argv)
    while isinstance(group, click.Group):
        name = words.pop(0)
        sub = group.get_command(ctx, name)
        assert sub is not None, f"regtrack has no command {name!r}"
        group = sub
    known = {opt for p in group.params for opt in (*p.opts, *p.secondary_opts)}
    for word in words:
        if word.startswith("--"):
            assert word.split("=")[0] in known, f"regtrack {argv[0]}: no option {word}"
    return group


def test_the_workflow_shards_one_plan_and_merges_it():
    flow = yaml.safe_load(WORKFLOW.read_text())
    jobs = flow["jobs"]
    count = int(flow["env"]["SHARDS"])
    assert jobs["measure"]["strategy"]["matrix"]["shard"] == list(range(1, count + 1))
    measured = [c for s in jobs["measure"]["steps"] if "run" in s for c in _commands(s["run"])]
    decided = [c for s in jobs["decide"]["steps"] if "run" in s for c in _commands(s["run"])]
    assert measured and decided
    for argv in measured + decided:
        _check(argv)
    (shard_run,) = [c for c in measured if "--shard" in c]
    value = shard_run[shard_run.index("--shard") + 1]
    assert value == "X/X", "--shard ${{ matrix.shard }}/${{ env.SHARDS }}"
    step = next(s for s in jobs["measure"]["steps"] if "--shard" in s.get("run", ""))
    assert "${{ matrix.shard }}/${{ env.SHARDS }}" in step["run"]
    (merge,) = decided
    assert merge[:2] == ["ci", "--merge"], "the merge job decides (exit 1 on a regression)"
    assert jobs["decide"]["needs"] == "measure"
    uploads = [s for s in jobs["measure"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and "shard-${{ matrix.shard }}" in uploads[0]["with"]["name"]


def test_the_indexed_job_sets_what_regtrack_reads():
    shard_job, merge_job = list(yaml.safe_load_all(MANIFEST.read_text()))
    spec = shard_job["spec"]
    assert spec["completionMode"] == "Indexed"
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env[shards.COUNT_VARIABLE]) == spec["completions"]
    assert "JOB_COMPLETION_INDEX" in [index for index, _, _ in shards.ENGINES]
    # Kubernetes sets the index in each pod; regtrack turns it into shard K of N.
    shard = shards.from_environment({"JOB_COMPLETION_INDEX": "3", **env})
    assert (shard.index, shard.count) == (4, spec["completions"])
    resources = container["resources"]
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"], "Guaranteed QoS"
    assert spec["template"]["spec"]["nodeSelector"]
    for doc in (shard_job, merge_job):
        for c in doc["spec"]["template"]["spec"]["containers"]:
            for argv in _commands(" ".join(c["args"])):
                _check(argv)
    merged = [a for c in merge_job["spec"]["template"]["spec"]["containers"] for a in c["args"]]
    assert any("regtrack merge" in a for a in merged)
