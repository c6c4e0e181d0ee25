"""The scale-out examples in examples/ are usable as they are: they parse, every regtrack
command line in them uses only options regtrack has, and the shard variables they set are
the ones regtrack reads, with counts that agree. The Kubernetes manifest is valid for every
Kubernetes version it claims (kubernetes-validate's strict schemas), runs the image as
its user with what seed control needs, and its run script stops on a failed Job."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import click
import kubernetes_validate
import pytest
import yaml

from regtrack.bench import shards
from regtrack.cli import cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WORKFLOW = EXAMPLES / "github-actions-shards.yml"
MANIFEST = EXAMPLES / "kubernetes-indexed-job.yaml"
RUN_SCRIPT = EXAMPLES / "kubernetes-run.sh"
# The oldest Kubernetes the manifest claims (pod securityContext.appArmorProfile: 1.30).
OLDEST = (1, 30)


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
    # Every file regtrack writes, and every artifact, is outside the pull request's
    # checkout (under CI, regtrack refuses a database inside it).
    for argv in measured + decided:
        for option in ("--db", "--summary", "--json"):
            if option in argv:
                assert argv[argv.index(option) + 1].startswith("$RUNNER_TEMP/"), argv
    steps = [s for job in jobs.values() for s in job["steps"]]
    for step in steps:
        if "artifact" in step.get("uses", ""):
            assert step["with"]["path"].startswith("${{ runner.temp }}/"), step


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


def _claimed_versions() -> list[str]:
    """Every Kubernetes minor version from OLDEST to the newest the validator has."""
    newest = tuple(int(n) for n in kubernetes_validate.latest_version().split("."))
    assert newest >= OLDEST
    return [f"1.{minor}" for minor in range(OLDEST[1], newest[1] + 1)]


@pytest.mark.parametrize("version", _claimed_versions())
def test_the_manifest_is_valid_for_each_kubernetes_it_claims(version):
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        kubernetes_validate.validate(doc, version, strict=True)  # raises on an unknown field


def test_the_manifest_says_which_kubernetes_it_needs():
    """The version before OLDEST rejects it: the claim is the real minimum."""
    older = f"{OLDEST[0]}.{OLDEST[1] - 1}"
    with pytest.raises(kubernetes_validate.ValidationError, match="appArmorProfile"):
        for doc in yaml.safe_load_all(MANIFEST.read_text()):
            kubernetes_validate.validate(doc, older, strict=True)
    assert f"Kubernetes {OLDEST[0]}.{OLDEST[1]} or newer" in MANIFEST.read_text()


def test_the_pods_run_the_image_as_its_user_with_what_seeds_need():
    shard_job, merge_job = list(yaml.safe_load_all(MANIFEST.read_text()))
    dockerfile = (EXAMPLES.parent / "Dockerfile").read_text()
    uid = int(re.search(r"useradd .*--uid (\d+)", dockerfile).group(1))
    for doc in (shard_job, merge_job):
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == uid
        assert pod["securityContext"]["fsGroup"] == uid, "the results volume is writable"
        for container in pod["containers"]:
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
    # Seeds: unshare(2) and a mount in a user namespace, which the default profiles refuse.
    measuring = shard_job["spec"]["template"]["spec"]["securityContext"]
    assert measuring["seccompProfile"] == {"type": "Unconfined"}
    assert measuring["appArmorProfile"] == {"type": "Unconfined"}
    merging = merge_job["spec"]["template"]["spec"]["securityContext"]
    assert merging["seccompProfile"] == {"type": "RuntimeDefault"}, "no servers in the merge"


FAKE_KUBECTL = """#!/bin/sh
# kubectl as the run script sees it: each Job reports no condition once, then $OUTCOME.
echo "$*" >> "$FAKE/calls"
case "$1" in
    get) job=${2#job/}; n=$(cat "$FAKE/$job.n" 2>/dev/null || echo 0)
         echo $((n + 1)) > "$FAKE/$job.n"
         if [ "$n" -ge 1 ]; then cat "$FAKE/$job.outcome"; fi ;;
    logs) echo "## regtrack merged" ;;
esac
"""


def _run_script(
    tmp_path: Path, shards: str, merge: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    fake = tmp_path / "fake"
    (fake / "bin").mkdir(parents=True)
    kubectl = fake / "bin" / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    (fake / "regtrack-shards.outcome").write_text(shards)
    (fake / "regtrack-merge.outcome").write_text(merge)
    env = {**os.environ, "PATH": f"{fake / 'bin'}:{os.environ['PATH']}", "FAKE": str(fake),
           "REGTRACK_K8S_POLL": "0", "REGTRACK_K8S_TIMEOUT": "60"}  # fmt: skip
    proc = subprocess.run(
        ["sh", str(RUN_SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )
    return proc, (fake / "calls").read_text().splitlines()


def test_the_run_script_stops_waiting_when_an_index_fails(tmp_path):
    # Kubernetes 1.31+ sets FailureTarget before Failed; Complete never comes.
    proc, calls = _run_script(tmp_path, "FailureTarget Failed", "SuccessCriteriaMet Complete")
    assert proc.returncode == 1, proc.stderr
    assert "job/regtrack-shards Failed" in proc.stderr
    assert "## regtrack merged" in proc.stdout, "a failed Job is still merged"
    applied = [c for c in calls if c.startswith("apply")]
    labels = {d["metadata"]["name"]: d["metadata"]["labels"]["regtrack/step"]
              for d in yaml.safe_load_all(MANIFEST.read_text())}  # fmt: skip
    assert applied == [
        f"apply -f {MANIFEST} -l regtrack/step={labels['regtrack-shards']}",
        f"apply -f {MANIFEST} -l regtrack/step={labels['regtrack-merge']}",
    ]


def test_the_run_script_exits_0_when_both_jobs_complete(tmp_path):
    proc, _ = _run_script(tmp_path, "SuccessCriteriaMet Complete", "Complete")
    assert proc.returncode == 0, proc.stderr
    assert "job/regtrack-merge Complete" in proc.stderr
