"""A composite action's steps, or a workflow job's, run the way GitHub's runner runs them,
as far as a test on this machine can: `run:` steps in order with bash (`bash --noprofile
--norc -eo pipefail` as `shell: bash` is, `bash -e` without a shell), `${{ }}`
expressions evaluated from the inputs, github, runner, env and steps contexts, `if:`
conditions with the status functions, step outputs read from $GITHUB_OUTPUT. `uses:`
steps (actions/cache, actions/upload-artifact) cannot run here: they are recorded with
their evaluated `with:` so a test can check what they would get.

Expressions: literals ('text', numbers, true, false, null), context paths (with `-` in
names), `== != && || !`, parentheses, always() success() failure() cancelled(), and
hashFiles('PATTERN') of the workspace.
Anything else fails loudly rather than being guessed.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


@dataclass
class StepResult:
    """One step as the runner saw it."""

    name: str
    id: str | None
    kind: str  # "run" or "uses"
    outcome: str  # success, failure or skipped
    uses: str | None = None
    with_: dict[str, str] = field(default_factory=dict)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    steps: list[StepResult]
    outputs: dict[str, str]

    @property
    def failed(self) -> bool:
        """The job's result: a failed step fails it (no continue-on-error here)."""
        return any(s.outcome == "failure" for s in self.steps)

    def step(self, step_id: str) -> StepResult:
        (found,) = [s for s in self.steps if s.id == step_id]
        return found

    def uses(self, action: str) -> list[StepResult]:
        return [s for s in self.steps if s.uses and s.uses.split("@")[0] == action]

    def printed(self) -> str:
        return "".join(s.stdout + s.stderr for s in self.steps)


class Evaluator:
    """GitHub Actions expressions over given contexts."""

    def __init__(self, contexts: dict[str, Any], failed: bool = False):
        self.contexts, self.failed = contexts, failed

    def interpolate(self, text: str) -> str:
        return _EXPR.sub(lambda m: _to_text(self.evaluate(m.group(1))), text)

    def condition(self, text: str | None) -> bool:
        if text is None:
            return not self.failed  # success()
        text = str(text).strip()
        match = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
        return _truthy(self.evaluate(match.group(1) if match else text))

    def evaluate(self, text: str) -> Any:
        tokens = self._tokens(text)
        value, rest = self._or(tokens)
        if rest:
            raise ValueError(f"unexpected {rest[0]!r} in expression {text!r}")
        return value

    @staticmethod
    def _tokens(text: str) -> list[tuple[str, str]]:
        tokens, pos = [], 0
        while pos < len(text.rstrip()):
            match = _TOKEN.match(text, pos)
            if match is None:
                raise ValueError(f"cannot read expression {text!r} at {text[pos:]!r}")
            kind = match.lastgroup or ""
            tokens.append((kind, match.group(kind)))
            pos = match.end()
        return tokens

    def _or(self, t: list[tuple[str, str]]) -> tuple[Any, list[tuple[str, str]]]:
        left, t = self._and(t)
        while t and t[0] == ("op", "||"):
            right, t = self._and(t[1:])
            left = left if _truthy(left) else right
        return left, t

    def _and(self, t: list[tuple[str, str]]) -> tuple[Any, list[tuple[str, str]]]:
        left, t = self._compare(t)
        while t and t[0] == ("op", "&&"):
            right, t = self._compare(t[1:])
            left = right if _truthy(left) else left
        return left, t

    def _compare(self, t: list[tuple[str, str]]) -> tuple[Any, list[tuple[str, str]]]:
        left, t = self._not(t)
        while t and t[0] in (("op", "=="), ("op", "!=")):
            op = t[0][1]
            right, t = self._not(t[1:])
            equal = _to_text(left).lower() == _to_text(right).lower()  # case-insensitive
            left = equal if op == "==" else not equal
        return left, t

    def _not(self, t: list[tuple[str, str]]) -> tuple[Any, list[tuple[str, str]]]:
        if t and t[0] == ("op", "!"):
            value, t = self._not(t[1:])
            return not _truthy(value), t
        return self._primary(t)

    def _primary(self, t: list[tuple[str, str]]) -> tuple[Any, list[tuple[str, str]]]:
        if not t:
            raise ValueError("expression ends too early")
        (kind, text), t = t[0], t[1:]
        if (kind, text) == ("op", "("):
            value, t = self._or(t)
            if not t or t[0] != ("op", ")"):
                raise ValueError("missing ')'")
            return value, t[1:]
        if kind == "str":
            return text[1:-1].replace("''", "'"), t
        if kind == "num":
            return float(text), t
        if kind != "name":
            raise ValueError(f"unexpected {text!r}")
        if (
            text == "hashFiles"
            and t[:1] == [("op", "(")]
            and t[1][0] == "str"
            and t[2:3] == [("op", ")")]
        ):
            return self._hash_files(t[1][1][1:-1].replace("''", "'")), t[3:]
        if t and t[0] == ("op", "("):
            if len(t) < 2 or t[1] != ("op", ")"):
                raise ValueError(f"{text}() takes no arguments here")
            status = {"always": True, "success": not self.failed, "failure": self.failed,
                      "cancelled": False}  # fmt: skip
            if text not in status:
                raise ValueError(f"function {text}() is not modelled")
            return status[text], t[2:]
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text], t
        value: Any = self.contexts
        for part in text.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value, t

    def _hash_files(self, pattern: str) -> str:
        """hashFiles('PATTERN'): the files matching it in the workspace, hashed ('' if
        none, as GitHub gives)."""
        workspace = Path(self.contexts["github"]["workspace"])
        files = sorted(p for p in workspace.glob(pattern) if p.is_file())
        if not files:
            return ""
        digest = hashlib.sha256()
        for path in files:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()


def _truthy(value: Any) -> bool:
    return value not in (None, False, "", 0, 0.0)


def _to_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT's `name=value` lines and `name<<DELIMITER` blocks."""
    found: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            found[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        name, _, value = line.partition("=")
        found[name] = value
        i += 1
    return found


def run_action(
    action_yml: Path,
    inputs: dict[str, str],
    github: dict[str, Any],
    runner: dict[str, str],
    env: dict[str, str],
    workdir: Path,
    timeout: float = 120,
    stop_after: str | None = None,
) -> ActionRun:
    """Every step of the composite action at ``action_yml``, in order, as the runner
    would run them for a job with these contexts; ``env`` is the job's environment.
    ``stop_after``: the id of the last step to run."""
    action = yaml.safe_load(action_yml.read_text())
    base = Evaluator({"github": github, "runner": runner, "env": env})
    given = dict(inputs)
    for name, spec in action.get("inputs", {}).items():
        if name not in given:
            if spec.get("required"):
                raise ValueError(f"input {name} is required")
            given[name] = base.interpolate(str(spec.get("default", "")))
    contexts: dict[str, Any] = {
        "github": github, "runner": runner, "env": env, "inputs": given, "steps": {},
    }  # fmt: skip
    results = run_steps(action["runs"]["steps"], contexts, workdir, timeout, stop_after)
    final = Evaluator(contexts)
    outputs = {k: final.interpolate(str(v["value"])) for k, v in action.get("outputs", {}).items()}
    return ActionRun(results, outputs)


def run_job(
    workflow: dict[str, Any],
    job: str,
    github: dict[str, Any],
    runner: dict[str, str],
    env: dict[str, str],
    workdir: Path,
    timeout: float = 120,
) -> ActionRun:
    """Every step of one job of a workflow (already parsed), in order, as the runner
    would run them; a `run:` step without `shell:` runs as GitHub's default on Linux,
    `bash -e {0}`."""
    contexts: dict[str, Any] = {"github": github, "runner": runner, "env": env, "steps": {}}
    return ActionRun(run_steps(workflow["jobs"][job]["steps"], contexts, workdir, timeout), {})


def run_steps(
    steps: list[dict[str, Any]],
    contexts: dict[str, Any],
    workdir: Path,
    timeout: float = 120,
    stop_after: str | None = None,
) -> list[StepResult]:
    """Steps in order with these contexts (``contexts["steps"]`` filled as they run)."""
    github, runner, env = contexts["github"], contexts["runner"], contexts["env"]
    results: list[StepResult] = []
    for i, step in enumerate(steps):
        failed = any(r.outcome == "failure" for r in results)
        ev = Evaluator(contexts, failed)
        result = StepResult(step.get("name", f"step {i}"), step.get("id"),
                            "uses" if "uses" in step else "run", "skipped",
                            uses=step.get("uses"))  # fmt: skip
        if ev.condition(step.get("if")):
            if "uses" in step:
                result.with_ = {k: ev.interpolate(str(v)) for k, v in step.get("with", {}).items()}
                result.outcome = "success"
            else:
                _run_step(step, result, ev, env, github, runner, workdir / f"step-{i}", timeout)
        results.append(result)
        if result.id:
            contexts["steps"][result.id] = {"outputs": result.outputs, "outcome": result.outcome,
                                            "conclusion": result.outcome}  # fmt: skip
        if stop_after is not None and result.id == stop_after:
            break
    return results


def _run_step(
    step: dict[str, Any],
    result: StepResult,
    ev: Evaluator,
    env: dict[str, str],
    github: dict[str, Any],
    runner: dict[str, str],
    folder: Path,
    timeout: float,
) -> None:
    shell = step.get("shell")
    assert shell in ("bash", None), f"{result.name}: only shell: bash is modelled"
    # `shell: bash` is `bash --noprofile --norc -eo pipefail {0}`; no shell, `bash -e {0}`
    flags = ["--noprofile", "--norc", "-eo", "pipefail"] if shell else ["-e"]
    folder.mkdir(parents=True)
    script, output = folder / "script.sh", folder / "output"
    script.write_text(ev.interpolate(step["run"]))
    output.touch()
    step_env = {
        **env,
        "GITHUB_ACTION_PATH": github.get("action_path", ""),
        "GITHUB_OUTPUT": str(output),
        **{k: ev.interpolate(str(v)) for k, v in step.get("env", {}).items()},
    }
    proc = subprocess.run(
        ["bash", *flags, str(script)],
        cwd=github["workspace"], env=step_env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    result.returncode, result.stdout, result.stderr = proc.returncode, proc.stdout, proc.stderr
    result.outcome = "success" if proc.returncode == 0 else "failure"
    result.outputs = _outputs(output)


def job_env(
    github: dict[str, Any], runner: dict[str, str], extra: dict[str, str]
) -> dict[str, str]:
    """The environment the runner gives every step of a job (the GITHUB_* and RUNNER_*
    variables; never the token, which only a step's env: passes on)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    return {
        **keep,
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": github["api_url"],
        "GITHUB_SERVER_URL": github["server_url"],
        "GITHUB_REPOSITORY": github["repository"],
        "GITHUB_EVENT_NAME": github["event_name"],
        "GITHUB_EVENT_PATH": github["event_path"],
        "GITHUB_RUN_ID": str(github["run_id"]),
        "GITHUB_RUN_ATTEMPT": str(github["run_attempt"]),
        "GITHUB_SHA": github["sha"],
        "GITHUB_WORKSPACE": github["workspace"],
        "RUNNER_OS": runner["os"],
        "RUNNER_ARCH": runner["arch"],
        "RUNNER_TEMP": runner["temp"],
        **extra,
    }
