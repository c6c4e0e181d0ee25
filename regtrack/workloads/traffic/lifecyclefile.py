"""A sampled capture written as a ``kind = "lifecycle"`` file where its lifecycle was
inferred (lifecycle_infer.py), else as the mix (mixfile.py) with the reason in its first
header line.

Arguments are written from their redacted shapes only: the task's id as ``${task}``, an
id each consumer connection kept as its own as a stand-in ending in ``${consumer}``, other
ids and times as stand-ins of their length (an id that varied per task as the task's,
times that varied as ``${now}``), values as filler of their size: where it varied
(shapes.Sizes.varied), ``${fill:p10,p30,p50,p70,p90}``, one of those sizes drawn per
command; else of their median size (over 4 KiB: ``${payload}``; the pushed message that
carried the task's ids: ``${payload}``, data_size bytes), constants as seen. The file is
checked as a lifecycle before it is returned; one that does not validate falls back to the
mix, saying why.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import ValidationError

from regtrack.workloads import capture, commands
from regtrack.workloads.lifecycle import MIN_PAYLOAD, LifecycleWorkload
from regtrack.workloads.traffic import keyspecs, mixfile, shapes, value_sizes
from regtrack.workloads.traffic import lifecycle_infer as li
from regtrack.workloads.traffic import lifecycle_links as links
from regtrack.workloads.traffic.redaction import PLACEHOLDER
from regtrack.workloads.traffic.sampled import SampledCapture

FILLER_MAX = mixfile.FILLER_MAX  # larger values are ${payload} (data_size: their median)
# Stand-ins for a placeholder of each kind, repeated or cut to the length seen.
STAND_IN = {
    "uuid": "a3f1c2d4-e5b6-4788-99aa-bbccddeeff00", "hex": "a3f1c2d4e5b64788",
    "ts": "2026-01-01T00:00:00.000000Z", "email": "user@example.invalid",
    "token": "Tk0aaaaaaaaaaaaa", "name": "n",
}  # fmt: skip
_FIXED = {"uuid": 36}  # placeholders of one length; the others share what is left
MAX_CONNECTIONS = 1000  # producers, and consumers, written at most (limits.CONNECTIONS)
_IDS = {"uuid", "hex", "token", "name", "email"}
MAX_SIZES = 40  # value size records in the header at most


@dataclass(frozen=True)
class Written:
    """The file's text, its kind, and why it is not a lifecycle (None: it is)."""

    text: str
    kind: str  # "lifecycle" or "mix"
    why_not: str | None = None


@dataclass
class _Render:
    scripts: dict[str, str]  # sha -> body, every one known
    names: dict[str, str] = field(default_factory=dict)  # sha -> [scripts] name
    large: list[int] = field(default_factory=list)
    carried: list[int] = field(default_factory=list)  # sizes of pushed messages (${payload})
    approximated: set[str] = field(default_factory=set)
    drawn: int = 0  # values written as ${fill:...}, their sizes drawn per command

    def arg(self, slot: li.Slot) -> str:
        if slot.role == keyspecs.SCRIPT:
            return slot.shape or ""
        if slot.role == keyspecs.SHA:
            sha = str(slot.shape)
            if sha not in self.scripts:
                raise _NoScript(sha)
            name = self.names.setdefault(sha, f"script_{len(self.names) + 1}")
            return "${sha:" + name + "}"
        if slot.name is not None and "${" not in slot.name:
            return slot.name  # --keep-names: a key that never varied, as seen
        if slot.payload:  # the pushed message: the engine's, holding the task's id
            self.carried.append(slot.size)
            if slot.sizes is not None and slot.sizes.varied:
                self.approximated.add(
                    f"the pushed message is data_size bytes each time (its sizes varied, "
                    f"{slot.sizes.low}-{slot.sizes.high} bytes: ${{payload}} has one size)"
                )
            return "${payload}"
        if slot.shape is None:
            if slot.sizes is not None and slot.sizes.varied:
                self.drawn += 1
                return "${fill:" + ",".join(map(str, slot.sizes.quantiles)) + "}"
            if slot.size > FILLER_MAX:
                self.large.append(slot.size)
                return "${payload}"
            return "x" * slot.size
        kinds = PLACEHOLDER.findall(slot.shape)
        if not kinds:
            return slot.shape
        lengths = _lengths(slot.shape, kinds, slot.size)
        parts = iter(zip(kinds, slot.parts or (li.CONSTANT,) * len(kinds), lengths, strict=True))
        value = slot.role == keyspecs.VALUE
        return PLACEHOLDER.sub(lambda _: self._part(*next(parts), value), slot.shape)

    def _part(self, kind: str, part: str, length: int, value: bool) -> str:
        """One placeholder as written; ``value``: the whole of a value (no key to link)."""
        if part == li.TASK:
            return "${task}"
        stand_in = _stand_in(kind, length)
        if part == li.CONSUMER and kind in _IDS:
            return stand_in[: max(1, length - 2)] + "${consumer}"
        if part == li.VARYING and kind in _IDS and not value:
            self.approximated.add("ids that varied per task other than the task's (an "
                                  "execution id) are the task's id")  # fmt: skip
            return "${task}"
        if kind in {"int", "num"} and length >= 10:
            self.approximated.add("numbers of 10 digits or more (times, scores) are ${now}")
            return "${now}"
        return stand_in


def _stand_in(kind: str, length: int) -> str:
    """A stand-in of ``kind`` about ``length`` long (numbers still numbers)."""
    if kind == "num":
        return "0." + "5" * max(1, length - 2)
    if kind == "int":
        return "1" * max(1, length)
    return (STAND_IN[kind] * max(1, length))[: max(1, length)]


class _NoScript(Exception):
    def __init__(self, sha: str) -> None:
        super().__init__(sha)
        self.sha = sha


def _lengths(shape: str, kinds: list[str], size: int) -> list[int]:
    """How long each placeholder of ``shape`` was, from the argument's size."""
    left = max(0, size - len(PLACEHOLDER.sub("", shape)) - sum(_FIXED.get(k, 0) for k in kinds))
    free = [k for k in kinds if k not in _FIXED]
    each = left // len(free) if free else 0
    return [_FIXED.get(k, each) for k in kinds]


def text(sampled: SampledCapture, name: str, given_scripts: dict[str, str]) -> Written:
    """The workload file for ``sampled``: its lifecycle where one was inferred and it
    validates, else the mix (checked as one) with the reason first in its header."""
    found = li.infer(sampled.sample.records)
    if isinstance(found, li.Inferred):
        seen = shapes.infer(sampled.sample.records)
        scripts = {**seen.scripts, **given_scripts}
        try:
            written = _lifecycle(sampled, found, name, scripts, seen)
        except _NoScript as missing:
            found = li.NotInferred(
                f"EVALSHA {missing.sha} in a task's steps: its body was not in the sample "
                "(give --script SHA=FILE)"
            )
        else:
            try:
                LifecycleWorkload(**tomllib.loads(written))
                return Written(written, "lifecycle")
            except (ValidationError, tomllib.TOMLDecodeError) as exc:
                first = str(exc).splitlines()
                found = li.NotInferred(
                    "the inferred lifecycle did not validate: "
                    + " ".join(first[:3] if isinstance(exc, ValidationError) else first[:1])
                )
    mix = mixfile.text(sampled, name, given_scripts)
    line = f"# Written as a mix, not a lifecycle: {capture.comment(found.reason)}\n"
    return Written(line + mix, "mix", found.reason)


def _steps(r: _Render, part: str, steps: Iterable[li.Step]) -> list[str]:
    out = []
    for step in steps:
        rows = [capture.toml_list([c.name, *(r.arg(s) for s in c.slots)]) for c in step.commands]
        out += [f"[[{part}]]", "commands = [", *(f"  {row}," for row in rows), "]", ""]
    return out


def _lifecycle(
    sampled: SampledCapture,
    found: li.Inferred,
    name: str,
    scripts: dict[str, str],
    seen: shapes.Shapes,
) -> str:
    r = _Render(scripts)
    body = [
        *_steps(r, "enqueue", found.enqueue),
        "[dequeue]",
        f"command = {capture.toml_list([found.dequeue.name, *map(r.arg, found.dequeue.slots)])}",
        "",
        *_steps(r, "process", found.process),
    ]
    every = [c for s in (*found.enqueue, *found.process) for c in s.commands]
    floor = max(
        (commands.version_tuple(commands.since([c.name]) or "2.8") for c in
         [*every, found.dequeue]),
        default=(2, 8),
    )  # fmt: skip
    extra = [n for n in links.SUBSCRIPTIONS if n in {c.name for c in every}]  # not KNOWN
    producers = min(found.producers, MAX_CONNECTIONS)
    consumers = min(found.consumers, MAX_CONNECTIONS)
    loaded = ["[scripts]", *(f"{n} = {capture.toml_str(scripts[sha])}"
                             for sha, n in r.names.items()), ""]  # fmt: skip
    out = [
        *_header(sampled, found),
        *_sizes(seen, {c.name for c in [*every, found.dequeue]}),
        "",
        f"name = {capture.toml_str(name)}",
        'kind = "lifecycle"',
        f"description = {capture.toml_str('Inferred from a sample of ' + sampled.counted.url)}",
        "follows = "
        + capture.toml_str(
            f"the traffic sampled from {sampled.counted.url} (Redis {sampled.counted.version})"
        ),
        f"approximations = {capture.toml_str(_approximations(found, r))}",
        f'min_redis = "{".".join(str(p) for p in floor)}"',
        f"data_size = {_data_size(r)}",
        f"producers = {producers}",
        f"consumers = {consumers}",
        "max_queued = 1000",
        *([f"extra_commands = {capture.toml_list(extra)}"] if extra else []),
        "",
        *capture.server_table(sampled.counted),
        *(loaded if r.names else []),
        *body,
    ]
    return "\n".join(out).rstrip() + "\n"


def _data_size(r: _Render) -> int:
    """The pushed message's median size where one carried the task, else large values'."""
    sizes = sorted(r.carried or r.large)
    return max(MIN_PAYLOAD, sizes[len(sizes) // 2] if sizes else 0)


def _approximations(found: li.Inferred, r: _Render) -> str:
    notes = [
        f"The most common task path: {found.cycles[0]} of {found.cycles[1]} consumer cycles "
        f"and {found.enqueues[0]} of {found.enqueues[1]} enqueues in the sample had it.",
        "Values are filler of their median size"
        + (
            f", or where their sizes varied (the largest over {value_sizes.NARROW:g} x the "
            f"smallest, {value_sizes.MIN_DRAWN} or more seen) of one of their sizes at p10, "
            "p30, p50, p70 and p90 drawn per command (${fill:...})"
            if r.drawn
            else ""
        )
        + "; constant ids and times are stand-ins of their length; an id a consumer's "
        "connection kept is one per consumer (${consumer}).",
        *(note[:1].upper() + note[1:] + "." for note in sorted(r.approximated)),
        *(
            [
                "The pushed message is ${payload}: data_size bytes holding the task's id, where "
                "the library's held its ids (task id, delivery tag: each ${task} in the steps)."
            ]
            if r.carried
            else []
        ),
        *(
            [
                "A caller's subscription to the task's channel, on a connection of its own, is "
                "sent by the producer, SUBSCRIBE then UNSUBSCRIBE at once (RESP2: a subscribed "
                "connection sends nothing else)."
            ]
            if any(c.name in links.SUBSCRIPTIONS for st in found.enqueue for c in st.commands)
            else []
        ),
        *(
            [
                f"The consumer's steps were sent on {found.helpers + 1} connections (the pop on "
                "one); written on the consumer's one, their steps that named no task left out."
            ]
            if found.helpers
            else []
        ),
        "The task's own work is 0 (work_us); producers and consumers as many connections as "
        "sent the pushes and the pops; blocking timeouts as sent.",
    ]
    if found.left_out:
        notes.append("Not sent (no lifecycle does): " + ", ".join(found.left_out[:12]) + ".")
    if found.callers or found.others:
        notes.append(
            f"Left out: {found.callers} connections that named a task's id without pushing or "
            f"popping it (a caller polling its result) and {found.others} others."
        )
    return " ".join(notes)


def _header(sampled: SampledCapture, found: li.Inferred) -> list[str]:
    s, c = sampled.sample, sampled.counted
    pushes = {cmd.name for step in found.enqueue for cmd in step.commands} & links.PUSHES
    carried = any(sl.payload for step in found.enqueue for cmd in step.commands for sl in cmd.slots)
    return [
        f"# Sampled by `regtrack mix capture --sample` from {capture.comment(c.url)} "
        f"(Redis {capture.comment(c.version)}): MONITOR for {s.seconds:.1f} s (stopped by "
        f"{s.stopped_by}), {len(s.records)} commands; commandstats counted {c.total_calls}.",
        f"# Written as a lifecycle: the task's id{' (inside its message)' if carried else ''} "
        "pushed by "
        f"{capture.comment('/'.join(sorted(pushes)))} on {found.producers} producer "
        f"connection(s), popped by {capture.comment(found.dequeue.name)} on {found.consumers} "
        f"consumer connection(s), read in {capture.comment(', '.join(found.link) or '-')}.",
        "# Redacted: every value (filler of its size, drawn from its sizes where they varied), "
        "the variable parts of key names "
        + (
            "that varied (stand-ins; the names that never varied kept as seen: --keep-names)"
            if s.keep_names
            else "(stand-ins)"
        )
        + f", the arguments of {s.secrets_dropped} AUTH/HELLO/ACL/CONFIG/MIGRATE "
        "commands (dropped unread).",
        "# Still approximated: see `approximations` below.",
    ]


def _sizes(seen: shapes.Shapes, sent: set[str]) -> list[str]:
    """What the sample's commands that the file sends looked like: their fields per call
    (each is sent with its most common shape's) and their values' sizes (what --check
    compares the replay's with)."""
    counts = [
        f"{capture.comment(c)} {z.low}-{z.high} (p10/p50/p90 {z.quantiles[0]}/{z.median}/"
        f"{z.quantiles[-1]})"
        for c, z in seen.field_counts.items() if c in sent
    ]  # fmt: skip
    lines = [f"# Fields per call, as seen (each step is sent with its most common shape's): "
             f"{', '.join(counts)}"] if counts else []  # fmt: skip
    return lines + value_sizes.header_lines(
        value_sizes.SizeRecord(capture.comment(a.command), a.position, a.sizes.low,
                               a.sizes.median, a.sizes.high, a.sizes.n, a.sizes.quantiles)
        for a in seen.arguments if a.sizes is not None and a.command in sent
    )[:MAX_SIZES + 1]  # fmt: skip
