"""A sample's task lifecycle, inferred from its redacted records, or why there is none.

A consumer is a connection that sends a blocking pop; its cycle per task is its round
trips from one pop to the next. A producer pushes onto a key the consumers pop; its
enqueue per task is its round trips since its previous push, up to this one. The link is
the pushed element: an id (a pseudonym, redaction.py: the same id is the same pseudonym on
every connection) that the consumer's cycle names again (``rq:job:{uuid}``) is the task's
``${task}``; or a message with ids inside it (kombu's), each of which is the task's where
a step names it again (lifecycle_links.py, which also follows a consumer whose pop and
work are on different connections). The most common shape of cycle, and of enqueue, is
the template; each of its arguments keeps its constant text, its sizes, and what
each variable part stood for over the tasks seen (the task's id, the consumer's own, one
constant, or varying).
With no such link (no blocking pop, no push onto the popped key, no id pushed or inside)
``NotInferred`` says why in one line, and the caller writes the mix form (mixfile.py).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from regtrack.workloads import commands
from regtrack.workloads.traffic import keyspecs
from regtrack.workloads.traffic import lifecycle_links as links
from regtrack.workloads.traffic.lifecycle_links import RawStep
from regtrack.workloads.traffic.monitor_line import Observed
from regtrack.workloads.traffic.redaction import PLACEHOLDER, Arg
from regtrack.workloads.traffic.shapes import PUBSUB, Sizes, round_trips

# What a variable part of an argument stood for over the tasks seen.
TASK, CONSUMER, CONSTANT, VARYING = "task", "consumer", "constant", "varying"
# Not sent by a lifecycle: connection set-up, the server's own, pub/sub (as a mix).
SKIPPED = {"SELECT", "QUIT", "RESET", "MONITOR", "CLIENT", "HELLO", "AUTH", "INFO",
           "COMMAND"} | PUBSUB  # fmt: skip
_NUMBER = re.compile(r"-?(\d+(\.\d+)?([eE][-+]?\d+)?|\{int\}|\{num\})")


_NO_POP = (
    "no blocking pop (BLPOP, BRPOP, BLMOVE, BZPOPMIN, XREADGROUP BLOCK ...) in the sample: "
    "no consumer to follow"
)


@dataclass(frozen=True)
class Slot:
    """One argument of an inferred command: its role (keyspecs), its redacted shape (None:
    its size only), its median size (and all its sizes), and what each placeholder of the
    shape (a value that is one id as a whole: its one) stood for: TASK, CONSUMER, CONSTANT
    or VARYING."""

    role: str
    shape: str | None
    size: int
    parts: tuple[str, ...] = ()
    payload: bool = False  # the pushed message that carried the task's id inside it
    name: str | None = None  # the key as seen, where it never varied (--keep-names only)
    sizes: Sizes | None = None  # every size it had over the tasks seen


@dataclass(frozen=True)
class Command:
    name: str
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class Step:
    """One round trip: one command, or MULTI ... EXEC."""

    commands: tuple[Command, ...]


@dataclass(frozen=True)
class Inferred:
    """A task's lifecycle as the sample showed it."""

    enqueue: tuple[Step, ...]
    dequeue: Command
    process: tuple[Step, ...]
    producers: int  # connections whose pushes the template's enqueues ended with
    consumers: int  # connections that sent the blocking pop
    link: tuple[str, ...]  # key families of the consumer's cycle that held the task's id
    cycles: tuple[int, int]  # consumer cycles of the template's shape, of those linked
    enqueues: tuple[int, int]  # enqueues of the template's shape, of those seen
    left_out: tuple[str, ...]  # commands no lifecycle sends, with their counts
    callers: int  # other connections that named a task's id (a caller polling its result)
    others: int  # connections that neither pushed, popped nor named a task
    helpers: int = 0  # connections a consumer's steps were sent on besides its pop's


@dataclass(frozen=True)
class NotInferred:
    reason: str  # one line


def infer(records: Iterable[Observed]) -> Inferred | NotInferred:
    """The lifecycle of ``records`` (one sample, in the server's order), or why none."""
    by_conn: dict[str, list[Observed]] = defaultdict(list)
    for r in records:
        if not r.lua:
            by_conn[r.connection].append(r)
    dropped: Counter[str] = Counter()
    subs: list[RawStep] = []
    steps = {c: _cleaned(round_trips(rs), dropped, subs) for c, rs in by_conn.items()}
    pops = {c: [i for i, s in enumerate(ss) if _pop(s)] for c, ss in steps.items()}
    pops = {c: at for c, at in pops.items() if at}
    if not pops:
        return NotInferred(_NO_POP)
    popped = {k for c, at in pops.items() for i in at for k in _popped_keys(steps[c][i][0])}
    pushed, payloads, alias = links.pushed_tasks(steps, popped)
    if not pushed:
        if payloads:
            return NotInferred(
                f"the elements pushed to {_names(popped)} are not ids and hold none (median "
                f"{statistics.median(payloads):.0f} bytes): nothing links a push to a pop"
            )
        return NotInferred(f"no connection pushed to {_names(popped)} during the sample")
    steps = {c: [links.aliased(s, alias) for s in ss] for c, ss in steps.items()}
    cycles, helpers = _consumer_cycles(steps, pops, pushed)
    if not cycles:
        return NotInferred(
            f"no consumer's cycle named a task pushed to {_names(popped)} in the sample "
            "(a sample shorter than a task's wait in the queue: consumers behind their "
            "producers work on tasks pushed before it; or ids no consumer names again)"
        )
    enqueues = [e for conn, ss in steps.items() for e in _enqueues(conn, ss, pushed)]
    enqueues = links.subscribed(enqueues, [links.aliased(s, alias) for s in subs], dropped)
    shared = _shared(steps, pushed)
    process, n_cycles = _template(cycles, per_consumer=True, shared=shared)
    enqueue, n_enqueues = _template(enqueues, per_consumer=False)
    dequeue = _dequeue(cycles, shared)
    if isinstance(dequeue, NotInferred):
        return dequeue
    producers = {pushed[e.task][0] for e in enqueues}
    tasks = set(pushed)
    named = {
        conn for conn, ss in steps.items()
        if conn not in pops and conn not in producers | helpers
        and any(set(links.ids(s)) & tasks for s in ss)
    }  # fmt: skip
    return Inferred(
        enqueue=enqueue,
        dequeue=dequeue,
        process=process,
        producers=max(1, len(producers)),
        consumers=max(1, len(pops)),
        link=tuple(sorted(_link(cycles))),
        cycles=(n_cycles, len(cycles)),
        enqueues=(n_enqueues, len(enqueues)),
        left_out=tuple(f"{name} x{n}" for name, n in dropped.most_common()),
        callers=len(named),
        others=len(set(steps) - set(pops) - producers - named - helpers),
        helpers=len(helpers),
    )


def _shared(steps: dict[str, list[RawStep]], pushed: dict[str, tuple[str, int]]) -> frozenset[str]:
    """The pseudonyms a producer's connection named: the queue's, never a consumer's own."""
    producers = {conn for conn, _ in pushed.values()}
    return frozenset(
        m for conn in producers for step in steps[conn] for r in step for a in r.args
        for m in links.marks(a)
    )  # fmt: skip


def _consumer_cycles(
    steps: dict[str, list[RawStep]], pops: dict[str, list[int]], pushed: dict[str, tuple[str, int]]
) -> tuple[list[links.Seen], set[str]]:
    """Consumers' cycles on their pop's connection; where none names a task, on the other
    connections that name them (kombu's, links.split_cycles), and those connections."""
    cycles = [c for conn, at in pops.items() for c in _cycles(conn, steps[conn], at, pushed)]
    if cycles:
        return cycles, set()
    return links.split_cycles(steps, pops, {conn for conn, _ in pushed.values()}, pushed)


def _cleaned(
    steps: list[list[Observed]], dropped: Counter[str], subs: list[RawStep]
) -> list[RawStep]:
    """``steps`` without what no lifecycle sends (counted in ``dropped``); a transaction
    left with MULTI and EXEC alone is dropped whole. A SUBSCRIBE or UNSUBSCRIBE of one
    channel goes to ``subs`` as well: a caller's wait for its task's result, which the
    task's enqueue sends where it names the task (links.subscribed)."""
    out = []
    for step in steps:
        if len(step) == 1 and step[0].command in links.SUBSCRIPTIONS and len(step[0].args) == 1:
            subs.append(tuple(step))
        kept = []
        for r in step:
            words = [r.command, *(a.shape or "" for a in r.args)]
            inside = len(step) > 1 and r.command not in {"MULTI", "EXEC", "DISCARD"}
            if (
                r.redacted or r.command in SKIPPED or r.command not in commands.KNOWN
                or commands.refused(words) or (inside and commands.blocks(words))
            ):  # fmt: skip
                dropped[r.command] += 1
            else:
                kept.append(r)
        if kept and not all(r.command in {"MULTI", "EXEC", "DISCARD"} for r in kept):
            out.append(tuple(kept))
    return out


def _pop(step: RawStep) -> bool:
    r = step[0]
    return len(step) == 1 and commands.blocks([r.command, *(a.shape or "" for a in r.args)])


def _popped_keys(r: Observed) -> list[str]:
    """The keys a blocking pop takes from (BLMOVE's and BRPOPLPUSH's first only)."""
    keys = [a.shape for a in r.args if a.role == keyspecs.KEY and a.shape]
    return keys[:1] if r.command in {"BLMOVE", "BRPOPLPUSH"} else keys


def _cycles(
    conn: str, steps: list[RawStep], pops: list[int], pushed: dict[str, tuple[str, int]]
) -> list[links.Seen]:
    """A consumer's cycles: its steps from each pop to the next (before its first pop the
    sample may have cut a task, after its last the sample's end), each with the pushed id
    it names most; steps that name another task's id (an enqueue on a shared connection)
    left out, cycles that name none (an empty pop, a task pushed before the sample) too."""
    out = []
    for a, b in itertools.pairwise(pops):
        named = Counter(i for s in steps[a + 1 : b] for i in links.ids(s) if i in pushed)
        if not named:
            continue
        task = named.most_common(1)[0][0]
        others = set(named) - {task}
        kept = tuple(s for s in steps[a + 1 : b] if not set(links.ids(s)) & others)
        out.append(links.Seen(conn, task, kept, steps[a][0]))
    return out


def _enqueues(
    conn: str, steps: list[RawStep], pushed: dict[str, tuple[str, int]]
) -> list[links.Seen]:
    """A connection's enqueues: for each push of a task's id, its steps since the
    connection's previous push or pop, without those that name another task. The first
    one's start may be cut by the sample: left out where the connection pushed again."""
    ends: dict[int, str] = {}
    for t, (c, i) in pushed.items():
        if c == conn:
            ends.setdefault(i, t)
    out = []
    start, cut = 0, True
    for i, step in enumerate(steps):
        if _pop(step):
            start, cut = i + 1, False
        if i not in ends:
            continue
        task, window = ends[i], steps[start:i]
        start, skip, cut = i + 1, cut and len(ends) > 1, False
        if skip:
            continue
        kept = tuple(s for s in window if not (set(links.ids(s)) & set(pushed)) - {task})
        out.append(links.Seen(conn, task, (*kept, step)))
    return out


def _marked(a: Arg, task: str) -> str | None:
    """``a``'s shape with the placeholders that held ``task`` as ``${task}``."""
    if a.shape is None:
        return None
    marks = iter(links.marks(a))
    return PLACEHOLDER.sub(lambda m: "${task}" if next(marks, None) == task else m[0], a.shape)


def _key(step: RawStep, task: str) -> tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...]:
    """What makes two steps alike: commands, roles, shapes (the task's id marked; numbers,
    kept or placeholders, as one: a HINCRBYFLOAT's amount, a score)."""
    return tuple(
        (r.command, tuple((a.role, _coarse(_marked(a, task))) for a in r.args)) for r in step
    )


def _coarse(shape: str | None) -> str | None:
    return "{n}" if shape and _NUMBER.fullmatch(shape) else shape


def _template(
    seen: Sequence[links.Seen], per_consumer: bool, shared: frozenset[str] = frozenset()
) -> tuple[tuple[Step, ...], int]:
    """The most common shape among ``seen`` (the first seen of those as common), as steps,
    and how many of ``seen`` had it."""
    groups: dict[tuple[object, ...], list[links.Seen]] = {}
    for s in seen:
        groups.setdefault(tuple(_key(step, s.task) for step in s.steps), []).append(s)
    group = max(groups.values(), key=len)
    steps = tuple(
        Step(
            tuple(
                _command([s.steps[i][j] for s in group], group, per_consumer, shared)
                for j in range(len(step))
            )
        )
        for i, step in enumerate(group[0].steps)
    )
    return steps, len(group)


def _command(
    records: list[Observed],
    seen: list[links.Seen],
    per_consumer: bool,
    shared: frozenset[str] = frozenset(),
) -> Command:
    """One command of a template from its occurrences (``records[i]`` in ``seen[i]``);
    ``shared``: pseudonyms a producer named too (never a consumer's own)."""
    slots = []
    for k, arg in enumerate(records[0].args):
        args = [r.args[k] for r in records]
        shape = Counter(a.shape for a in args).most_common(1)[0][0]
        alike = [(links.marks(a), s) for a, s in zip(args, seen, strict=True) if a.shape == shape]
        n = len(alike[0][0])
        parts = tuple(
            _part([(marks[m], s.task, s.connection) for marks, s in alike if len(marks) == n],
                  per_consumer, shared)
            for m in range(n)
        )  # fmt: skip
        sizes = Sizes.of([a.size for a in args])
        carried = [
            bool(a.inner) and a.ids[:1] == (s.task,) for a, s in zip(args, seen, strict=True)
        ]
        payload = shape is None and 2 * sum(carried) > len(carried)
        names = {a.name for a in args}
        name = names.pop() if len(names) == 1 and all(p == CONSTANT for p in parts) else None
        slots.append(Slot(arg.role, shape, sizes.median, parts, payload, name=name, sizes=sizes))
    return Command(records[0].command, tuple(slots))


def _part(
    values: list[tuple[str, str, str]], per_consumer: bool, shared: frozenset[str] = frozenset()
) -> str:
    """What one placeholder stood for, from (its pseudonym, the task's, the connection)."""
    if all(mark == task for mark, task, _ in values):
        return TASK
    if len({mark for mark, _, _ in values}) == 1 and values[0][0] in shared:
        return CONSTANT  # the queue's name, which one consumer alone would pass for its own
    by_conn: dict[str, set[str]] = defaultdict(set)
    for mark, _, conn in values:
        by_conn[conn].add(mark)
    if all(len(marks) == 1 for marks in by_conn.values()):
        distinct = set().union(*by_conn.values())
        if per_consumer and len(distinct) == len(by_conn):
            return CONSUMER  # one per consumer connection (a worker's name)
        if len(distinct) == 1:
            return CONSTANT
    return VARYING


def _dequeue(cycles: list[links.Seen], shared: frozenset[str]) -> Command | NotInferred:
    """The most common blocking pop among those that began a linked cycle."""
    began = [c for c in cycles if c.pop is not None]
    groups: dict[object, list[links.Seen]] = {}
    for c in began:
        groups.setdefault(_key((c.pop,), ""), []).append(c)  # type: ignore[arg-type]
    group = max(groups.values(), key=len)
    command = _command([c.pop for c in group if c.pop], group, per_consumer=True, shared=shared)
    if any(p in (TASK, VARYING) for s in command.slots for p in s.parts):
        return NotInferred(
            f"the blocking pop ({command.name}) names keys that vary from one pop to the next"
        )
    return command


def _link(cycles: list[links.Seen]) -> set[str]:
    """The key families in which consumers read the task's id."""
    return {
        str(a.shape)
        for c in cycles
        for step in c.steps
        for r in step
        for a in r.args
        if a.role == keyspecs.KEY and c.task in links.marks(a)
    }


def _names(keys: set[str]) -> str:
    return ", ".join(sorted(keys))[:120]
