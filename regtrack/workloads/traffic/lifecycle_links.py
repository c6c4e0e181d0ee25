"""What links a sample's pushes to its consumers' steps (lifecycle_infer.py): the ids each
argument names, the tasks pushed onto a popped key (an id pushed as a whole, as RQ does,
or a message with ids inside it, as kombu's), and the steps of consumers that pop on one
connection and work on others.

A message's ids (redaction.py: pseudonyms found inside a pushed value, never its text)
are named as the message's task wherever a step names them again: kombu's task id
(``celery-task-meta-<id>``) and its delivery tag (``HSET unacked <tag>``) are then both
the task's ``${task}``.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass

from regtrack.workloads.traffic import keyspecs
from regtrack.workloads.traffic.monitor_line import Observed
from regtrack.workloads.traffic.redaction import PLACEHOLDER, Arg

PUSHES = {"LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "XADD", "ZADD"}
RawStep = tuple[Observed, ...]
# A caller's wait for one task's result (Celery's AsyncResult: the result backend's
# SUBSCRIBE to celery-task-meta-<id> as the task is sent, UNSUBSCRIBE when it is dropped).
SUBSCRIPTIONS = ("SUBSCRIBE", "UNSUBSCRIBE")


@dataclass(frozen=True)
class Seen:
    """One task's steps on one connection: an enqueue or a consumer's cycle."""

    connection: str
    task: str  # the task's id (a pseudonym)
    steps: tuple[RawStep, ...]
    pop: Observed | None = None  # the blocking pop that began a consumer's cycle


def marks(a: Arg) -> tuple[str, ...]:
    """The pseudonyms of ``a``'s placeholders, in order."""
    n = len(PLACEHOLDER.findall(a.shape or ""))
    return a.ids[:n] if n and len(a.ids) >= n else ()


def ids(step: RawStep) -> list[str]:
    return [i for r in step for a in r.args for i in marks(a)]


def pushes(step: RawStep, popped: set[str]) -> list[Observed]:
    return [
        r for r in step
        if r.command in PUSHES and r.args and r.args[0].role == keyspecs.KEY
        and r.args[0].shape in popped
    ]  # fmt: skip


def pushed_tasks(
    steps: dict[str, list[RawStep]], popped: set[str]
) -> tuple[dict[str, tuple[str, int]], list[int], dict[str, str]]:
    """Each task pushed onto a popped key: where (connection, step); the sizes of the
    pushed elements that were neither ids nor held one; and the ids inside pushed messages
    by their message (the task's key: the message's own pseudonym). An id inside more than
    one push (a reply queue's, the producer's own; a message pushed twice) names no one
    task: left out."""
    out: dict[str, tuple[str, int]] = {}
    messages: list[tuple[Arg, str, int]] = []
    for conn, ss in steps.items():
        for i, step in enumerate(ss):
            for r in pushes(step, popped):
                for a in r.args[1:]:
                    if a.role != keyspecs.VALUE:
                        continue
                    if a.shape and a.ids:
                        out.setdefault(a.ids[0], (conn, i))
                    else:
                        messages.append((a, conn, i))
    inside: dict[str, list[str]] = defaultdict(list)
    for a, _, _ in messages:
        for inner in a.inner:
            inside[inner].append(a.ids[0])
    alias = {i: held[0] for i, held in inside.items() if len(held) == 1}
    carried = set(alias.values())
    payloads = []
    for a, conn, i in messages:
        if a.ids and a.ids[0] in carried:
            out.setdefault(a.ids[0], (conn, i))
        else:
            payloads.append(a.size)
    return out, payloads, alias


def aliased(step: RawStep, alias: dict[str, str]) -> RawStep:
    """``step`` with each id found inside a pushed message named as that message's task."""
    if not alias:
        return step
    return tuple(
        dataclasses.replace(r, args=tuple(_aliased(a, alias) for a in r.args)) for r in step
    )


def _aliased(a: Arg, alias: dict[str, str]) -> Arg:
    return dataclasses.replace(a, ids=tuple(alias.get(i, i) for i in a.ids)) if a.ids else a


def split_cycles(
    steps: dict[str, list[RawStep]],
    pops: dict[str, list[int]],
    pushers: set[str],
    pushed: dict[str, tuple[str, int]],
) -> tuple[list[Seen], set[str]]:
    """Cycles of consumers whose pop's connection sends nothing else (kombu: the BRPOP on
    one connection, the unacked bookkeeping on the channel's, the result on the backend's),
    and those other connections: each task's steps on connections that neither push nor
    pop and name it (alone), in the server's order, begun by the last pop sent before the
    first of them. Their steps that name no task (a binding's refresh) are left out."""
    tasks = set(pushed)
    helpers = {
        c for c, ss in steps.items()
        if c not in pops and c not in pushers and any(set(ids(s)) & tasks for s in ss)
    }  # fmt: skip
    per_task: dict[str, list[RawStep]] = defaultdict(list)
    for c in sorted(helpers):
        for step in steps[c]:
            named = set(ids(step)) & tasks
            if len(named) == 1:
                per_task[named.pop()].append(step)
    began = sorted(((steps[c][i][0], c) for c, at in pops.items() for i in at),
                   key=lambda p: p[0].time)  # fmt: skip
    times = [p.time for p, _ in began]
    out = []
    for task, found in per_task.items():
        found.sort(key=lambda step: step[0].time)
        k = bisect.bisect_right(times, found[0][0].time) - 1
        if k >= 0:  # else popped before the sample began
            out.append(Seen(began[k][1], task, tuple(found), began[k][0]))
    return out, helpers


def subscribed(enqueues: list[Seen], subs: list[RawStep], dropped: Counter[str]) -> list[Seen]:
    """``enqueues`` with the subscriptions to a channel that names their task (alone): the
    producer's side waits for the result on a connection of its own (redis-py's pub/sub),
    replayed on the producer's. A task's SUBSCRIBE and UNSUBSCRIBE go in together where its
    first was sent (RESP2: a subscribed connection may send nothing else, so the push
    cannot come between them), and only where both were seen. Those joined are no longer
    counted as left out in ``dropped``."""
    by_task: dict[str, list[RawStep]] = defaultdict(list)
    for step in subs:
        named = set(ids(step))
        if len(named) == 1:
            by_task[named.pop()].append(step)
    out = []
    for e in enqueues:
        joined = sorted(by_task.get(e.task, []), key=lambda s: s[0].command != SUBSCRIPTIONS[0])
        kinds = Counter(step[0].command for step in joined)
        if not joined or kinds[SUBSCRIPTIONS[0]] != kinds[SUBSCRIPTIONS[1]]:
            out.append(e)
            continue
        dropped.subtract(kinds)
        at = min(step[0].time for step in joined)
        before = [s for s in e.steps if s[0].time < at]
        after = [s for s in e.steps if s[0].time >= at]
        out.append(dataclasses.replace(e, steps=(*before, *joined, *after)))
    for name in SUBSCRIPTIONS:
        if name in dropped and dropped[name] <= 0:
            del dropped[name]
    return out
