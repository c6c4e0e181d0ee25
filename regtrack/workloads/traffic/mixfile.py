"""A sampled capture written as a mix workload file: the shapes, as far as a mix can say.

Per role (traffic/shapes.py) one load generator process, the blocking pops of consumers
in a process of their own (a blocking command stalls memtier's rotation); steps in the
order first seen, transactions kept as MULTI ... EXEC, ratios from the steps' counts; key
families as patterns with ``__key__`` where their names vary (lockstep, so the id a step
writes is the one the next step reads), values as filler of their median size, constants
as seen. What a mix cannot express is said in the file's header.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field

from pydantic import ValidationError

from regtrack.core import limits
from regtrack.core.errors import CannotMeasure
from regtrack.workloads import capture, commands
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import keyspecs, value_sizes
from regtrack.workloads.traffic.redaction import PLACEHOLDER
from regtrack.workloads.traffic.sampled import SampledCapture
from regtrack.workloads.traffic.shapes import Role, Shapes, StepShape, Template, infer

MIN_SHARE = 0.005  # steps under 0.5% of their role's steps are listed, not replayed
MAX_RATIO = 50
MAX_BLOCK_S = 1  # blocking timeouts are written at most this long (_capped)
MIN_STEPS = 200  # in a sample of this many steps, a step seen once is not replayed
MAX_REPEATS = 10  # a transaction with a larger ratio is written this many times
FILLER_MAX = 4096  # larger values are __data__ (data_size: their median)
# Placeholders in an argument that is not a key: the lockstep number, or a fixed stand-in.
STAND_IN = {"int": "1700000000", "num": "1700000000.5", "ts": "2026-01-01T00:00:00.000000Z"}
NOT_REPLAYED = {"SELECT", "QUIT", "RESET", "MONITOR", "CLIENT", "HELLO", "AUTH", "INFO", "COMMAND"}

CANNOT = [
    "# Not expressible in a mix (memtier), so not replayed as seen:",
    "# - how fast each process runs relative to the others: every process runs flat out;",
    "# - one key range (keys) for every family: each family's own count is listed above;",
    "# - values carried from a reply into a later command (popped ids, stream ids): the",
    "#   lockstep number (key_pattern P) stands in for them;",
    "# - each value's size distribution (memtier sends one size per command): every value",
    "#   is written at its median size, its sizes at p10 ... p90 listed above;",
    "# - blocking timeouts longer than 1 s (memtier waits for every reply to end a",
    "#   trial): written as 1 s; the timeouts seen are listed above;",
    "# - pub/sub (SUBSCRIBE ...), SELECT, CLIENT, INFO (regtrack reads it around every",
    "#   trial), commands scripts ran (their script runs them), and the pipelining depth",
    "#   the clients used (pipelines = [1]).",
]


@dataclass
class _Writer:
    shapes: Shapes
    scripts: dict[str, str]
    names: dict[str, str] = field(default_factory=dict)  # sha -> setup save_as
    refused: list[str] = field(default_factory=list)
    large: list[int] = field(default_factory=list)
    steps: int = 0  # every role's steps in the sample
    key_digits: int = 1  # how many digits memtier's key numbers have (keys)

    def arg(self, role: str, shape: str | None, size: int) -> str:
        """One argument as written: a key's family with one ``__key__``, a value's filler
        or stand-in of its median size, a constant as seen."""
        if role == keyspecs.SCRIPT:
            return shape or ""
        if role == keyspecs.SHA:
            return "${" + self.names[str(shape)] + "}"
        if shape is None:
            if size > FILLER_MAX:
                self.large.append(size)
                return "__data__"
            return "x" * size
        if role == keyspecs.VALUE:  # a value that is one id as a whole
            kind = shape.strip("{}")
            if kind in STAND_IN:
                return (STAND_IN[kind] if kind == "ts" else "1" * size)[:size].ljust(size, "0")
            return self._padded("__key__", size) if kind in {"uuid", "hex"} else "x" * size
        keyed = False

        def stand_in(m: re.Match[str]) -> str:
            nonlocal keyed
            if m.group(1) in STAND_IN and role != keyspecs.KEY:
                small = {"int": "1", "num": "0.5"}.get(m.group(1))  # a count, a duration
                return small if small and size < 10 else STAND_IN[m.group(1)]
            if keyed:  # memtier replaces one __key__ per argument
                return "0"
            keyed = True
            return "__key__"

        return self._padded(PLACEHOLDER.sub(stand_in, shape), size)

    def _padded(self, arg: str, size: int) -> str:
        """``arg`` with zeros before its ``__key__``, so that once memtier puts a number
        there it is about as long as the names seen (ids are longer than key numbers)."""
        missing = size - (len(arg) - len("__key__") + self.key_digits)
        if "__key__" not in arg or missing <= 0:
            return arg
        return arg.replace("__key__", "0" * missing + "__key__", 1)

    def replayable(self, t: Template) -> str | None:
        """Why ``t`` cannot be replayed, or None."""
        words = [t.command, *(s or "" for _, s in t.args)]
        if t.command in NOT_REPLAYED or commands.refused(words):
            return "not replayed by a mix"
        if t.command not in commands.KNOWN:
            return "unknown to regtrack"
        for role, shape in t.args:
            if role == keyspecs.SHA and shape not in self.scripts:
                return f"EVALSHA {shape}: its body was not in the sample (give --script SHA=FILE)"
        return None


def text(sampled: SampledCapture, name: str, given_scripts: dict[str, str]) -> str:
    """The workload file (TOML) for ``sampled``, checked as a mix before it is returned."""
    shapes = infer(sampled.sample.records)
    if not shapes.commands:
        raise CannotMeasure(
            f"{sampled.counted.url}: the sample saw no commands in "
            f"{sampled.sample.seconds:.1f} s: sample while it is busy"
        )
    keys = max([f.cardinality for f in shapes.families if PLACEHOLDER.search(f.pattern)] or [1])
    keys = min(keys, int(limits.KEYS.high))
    w = _Writer(shapes, {**shapes.scripts, **given_scripts}, key_digits=len(str(keys)))
    w.steps = sum(s.count for r in shapes.roles for s in r.steps)
    body: list[str] = []
    for sha in shapes.evalsha:
        if sha in w.scripts:
            w.names[sha] = f"script_{len(w.names) + 1}"
    setup: list[str] = []
    for sha, save in w.names.items():
        load = capture.toml_list(["SCRIPT", "LOAD", w.scripts[sha]])
        setup += ["[[setup]]", f"command = {load}", f'save_as = "{save}"', ""]
    skipped: list[str] = []
    for role in shapes.roles:
        body += _role(w, role, skipped)
    if not body:
        raise CannotMeasure(
            f"{sampled.counted.url}: nothing the sample saw can be replayed as a mix: "
            + "; ".join(skipped[:5])
        )
    floor = max(
        (commands.version_tuple(commands.since([c]) or "2.8") for c in shapes.commands),
        default=(2, 8),
    )
    out = [
        *_header(sampled, shapes, skipped, w.refused),
        f"name = {capture.toml_str(name)}",
        'kind = "mix"',
        f"description = {capture.toml_str('Sampled from ' + sampled.counted.url)}",
        f'min_redis = "{".".join(str(p) for p in floor)}"',
        f"data_size = {sorted(w.large)[len(w.large) // 2] if w.large else 128}",
        f"keys = {keys}",
        "pipelines = [1]",
        "",
        *capture.server_table(sampled.counted),
        *setup,
        *body,
    ]
    written = "\n".join(out).rstrip() + "\n"
    try:
        MixWorkload(**tomllib.loads(written))
    except (ValidationError, tomllib.TOMLDecodeError) as exc:
        raise CannotMeasure(
            f"the sampled mix does not validate: {str(exc).splitlines()[0]}"
        ) from None
    return written


def _role(w: _Writer, role: Role, skipped: list[str]) -> list[str]:
    total = sum(s.count for s in role.steps)
    kept: list[StepShape] = []
    for step in role.steps:
        why = next((r for t in step.templates if (r := w.replayable(t))), None)
        if why is None and step.count / total < MIN_SHARE:
            why = "under 0.5% of the role's steps"
        if why is None and step.count == 1 and w.steps >= MIN_STEPS:
            why = "seen once (start-up, shut-down)"
        if why is None and step.blocking and step.transaction:
            why = "a blocking command inside a transaction"
        if why is not None:
            label = " ".join(t.command for t in step.templates)
            skipped.append(f"{role.name}: {label} x{step.count}: {why}")
            if why.startswith("EVALSHA") and why not in w.refused:
                w.refused.append(why)
            continue
        kept.append(step)
    out: list[str] = []
    for suffix, steps in (("", [s for s in kept if not s.blocking]),
                          ("-blocking", [s for s in kept if s.blocking])):  # fmt: skip
        if steps:
            clients = min(len(role.connections), max(s.connections for s in steps))
            out += _process(w, f"{role.name}{suffix}", clients, steps)
    return out


def _process(w: _Writer, name: str, clients: int, steps: list[StepShape]) -> list[str]:
    smallest = min(s.count for s in steps)
    lines = ["[[process]]", f"name = {capture.toml_str(name)}", f"clients = {max(1, clients)}", ""]
    keyed = False
    body: list[str] = []
    for step in steps:
        ratio = max(1, min(MAX_RATIO, round(step.count / smallest)))
        repeats = min(ratio, MAX_REPEATS) if step.transaction else 1
        for _ in range(repeats):
            first = True
            for t, sizes in zip(step.templates, step.sizes, strict=True):
                args = [t.command] + [
                    w.arg(role, shape, size.median)
                    for (role, shape), size in zip(t.args, sizes, strict=True)
                ]
                args = _capped(args)
                keyed = keyed or any("__key__" in a for a in args)
                note = f"   # x{step.count} in the sample" if first else ""
                first = False
                body += [f"[[process.commands]]{note}", f"args = {capture.toml_list(args)}"]
                if not step.transaction and ratio > 1:
                    body.append(f"ratio = {ratio}")
                body.append("__PATTERN__")
                body.append("")
    pattern = 'key_pattern = "P"'
    return lines + [(pattern if keyed else "") if line == "__PATTERN__" else line for line in body]


def _capped(args: list[str]) -> list[str]:
    """A blocking command's timeout at most MAX_BLOCK_S: memtier waits for every reply
    before it ends a trial, so a long timeout on an empty queue would stall the run."""
    if not commands.blocks(args):
        return args
    upper = [a.upper() for a in args]
    if args[0].upper() in commands.SOMETIMES_BLOCKING:
        at, cap = upper.index("BLOCK") + 1, MAX_BLOCK_S * 1000
    else:
        at, cap = (1 if args[0].upper() in {"BLMPOP", "BZMPOP"} else len(args) - 1), MAX_BLOCK_S
    try:
        too_long = float(args[at]) > cap or float(args[at]) == 0  # 0: wait for ever
    except (ValueError, IndexError):
        return args
    return [*args[:at], f"{cap:g}", *args[at + 1 :]] if too_long else args


def _header(
    sampled: SampledCapture, shapes: Shapes, skipped: list[str], refused: list[str]
) -> list[str]:
    s, c = sampled.sample, sampled.counted
    total = sum(shapes.commands.values())
    lines = [
        f"# Sampled by `regtrack mix capture --sample` from {capture.comment(c.url)} "
        f"(Redis {capture.comment(c.version)}):",
        f"# MONITOR for {s.seconds:.1f} s (stopped by {s.stopped_by}), {total} commands "
        f"from clients, {sum(shapes.lua_commands.values())} run by scripts;",
        f"# commandstats counted {c.total_calls} calls in the same interval. "
        f"Key positions: {s.key_table}.",
        "# Redacted: every value (written as filler of its median size), the variable parts",
        "# of key names ({uuid}, {hex}, {int}, {ts}, {email}, {token}, {name} became __key__)"
        + ("" if not s.keep_names else ", names kept as seen (--keep-names)"),
        f"# and the arguments of {s.secrets_dropped} AUTH/HELLO/ACL/CONFIG/MIGRATE commands "
        "(dropped unread).",
        f"# Transactions (MULTI ... EXEC): {shapes.transactions}.",
    ]
    lines += ["# Key families (distinct names in the sample, calls):"]
    lines += [
        f"#   {capture.comment(f.pattern)}: {f.cardinality} names, {f.calls} calls"
        for f in shapes.families[:20]
    ]
    if shapes.blocking:
        pops = [f"{b.command} {capture.comment(b.timeout)} x{b.calls}" for b in shapes.blocking]
        lines.append("# Blocking commands (timeout as sent): " + ", ".join(pops))
    if shapes.field_counts:
        fields = [
            f"{c} {z.low}-{z.high} (median {z.median}, p10 {z.quantiles[0]}, p90 {z.quantiles[-1]})"
            for c, z in shapes.field_counts.items()
        ]
        lines.append("# Fields per call: " + ", ".join(fields))
    sized = [a for a in shapes.arguments if a.sizes is not None][:20]
    lines += value_sizes.header_lines(
        value_sizes.SizeRecord(capture.comment(a.command), a.position, a.sizes.low,
                               a.sizes.median, a.sizes.high, a.sizes.n, a.sizes.quantiles)
        for a in sized if a.sizes
    )  # fmt: skip
    lines += [f"# Refused: {capture.comment(r)}" for r in refused]
    if skipped:
        lines.append("# Not replayed:")
        lines += [f"#   {capture.comment(x)}" for x in skipped[:40]]
    return [*lines, *CANNOT, ""]
