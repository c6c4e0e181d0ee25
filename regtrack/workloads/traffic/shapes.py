"""What a sample's commands look like, inferred from its redacted records.

Per connection, commands become steps (one command, or MULTI ... EXEC as one step, as
the client sent them), steps become templates (the command with its arguments' shapes;
value sizes kept apart), and connections get a role where it is obvious (a consumer
sends a blocking pop, a producer enqueues). Alongside: key families and how many names
each had, value sizes per command and argument, field counts of HSET-like commands,
constant arguments, blocking pops with their timeouts, scripts. Every record keeps the
pseudonyms, so the next step (a task's lifecycle: the id a producer wrote, read by a
consumer) can link them.
"""

from __future__ import annotations

import hashlib
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from regtrack.workloads import commands
from regtrack.workloads.traffic import keyspecs, value_sizes
from regtrack.workloads.traffic.monitor_line import Observed

ENQUEUES = {"LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "XADD", "ZADD", "PUBLISH"}
FIELD_COMMANDS = {"HSET": 1, "HMSET": 1, "HSETNX": 1, "XADD": None, "MSET": 0}
PUBSUB = {"SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "PUNSUBSCRIBE", "SSUBSCRIBE",
          "SUNSUBSCRIBE"}  # fmt: skip

_NUMBER = re.compile(r"-?(\d+(\.\d+)?([eE][-+]?\d+)?|\{int\}|\{num\})")
# One argument of a template: its role and its shape (None: size only, see Sizes)
Shape = tuple[str, str | None]


@dataclass(frozen=True)
class Sizes:
    """A distribution of sizes (bytes) or counts: its range, its median, and its sizes at
    five quantiles (value_sizes.QUANTILES, p10 ... p90: why five, there)."""

    n: int
    low: int
    median: int
    high: int
    quantiles: tuple[int, ...] = ()

    @classmethod
    def of(cls, values: Sequence[int]) -> Sizes:
        ordered = sorted(values)
        return cls(
            len(ordered), ordered[0], int(statistics.median(ordered)), ordered[-1],
            value_sizes.quantiles(ordered),
        )  # fmt: skip

    @property
    def varied(self) -> bool:
        """Sizes that vary (largest over NARROW x smallest, MIN_DRAWN seen or more): written
        as their distribution where the replay can draw one per command (a lifecycle)."""
        return value_sizes.varied(self.low, self.high, self.n) and len(set(self.quantiles)) > 1


@dataclass(frozen=True)
class Template:
    """A command as a replay sends it: its name and its arguments' shapes."""

    command: str
    args: tuple[Shape, ...]


@dataclass(frozen=True)
class StepShape:
    """A step (a command, or a transaction) seen ``count`` times on a role's connections,
    with the sizes of each argument of each command."""

    templates: tuple[Template, ...]
    transaction: bool
    count: int
    sizes: tuple[tuple[Sizes, ...], ...]
    connections: int = 1  # how many connections sent it

    @property
    def blocking(self) -> bool:
        return any(commands.blocks(_words(t)) for t in self.templates)


@dataclass(frozen=True)
class Role:
    """Connections alike in what they do: "consumer" (blocking pops), "producer"
    (enqueues, no blocking pop), "subscriber" (pub/sub only), "client" (the rest)."""

    name: str
    connections: tuple[str, ...]
    steps: tuple[StepShape, ...]  # in the order first seen


@dataclass(frozen=True)
class Family:
    """A key family: the keys of one shape, how many names it had, who used it."""

    pattern: str
    cardinality: int
    calls: int
    commands: tuple[str, ...]
    name: str | None = None  # the one name (--keep-names, a family of one name)


@dataclass(frozen=True)
class Argument:
    """An argument position of a command: its constant text, or its sizes."""

    command: str
    position: int  # 1-based, after the command name
    constant: str | None
    sizes: Sizes | None


@dataclass(frozen=True)
class Blocking:
    command: str
    timeout: str  # as sent: seconds, or "2000 ms" for XREAD(GROUP) BLOCK
    calls: int


@dataclass(frozen=True)
class Shapes:
    """Everything inferred from one sample."""

    commands: dict[str, int]  # client-sent commands by name (lua's apart)
    lua_commands: dict[str, int]  # commands scripts ran
    families: tuple[Family, ...]  # most called first
    roles: tuple[Role, ...]
    arguments: tuple[Argument, ...]
    field_counts: dict[str, Sizes]  # HSET-like command -> fields per call
    blocking: tuple[Blocking, ...]
    transactions: int  # MULTI ... EXEC blocks
    scripts: dict[str, str]  # sha1 -> body, from EVAL and SCRIPT LOAD seen
    evalsha: tuple[str, ...]  # the SHAs EVALSHA called
    redacted_commands: dict[str, int]  # arguments dropped unread (AUTH, HELLO, ...)


def infer(records: Iterable[Observed]) -> Shapes:
    """The shapes of ``records`` (one sample, in the order the server ran them)."""
    records = list(records)
    client = [r for r in records if not r.lua]
    by_conn: dict[str, list[Observed]] = defaultdict(list)
    for r in client:
        by_conn[r.connection].append(r)
    steps = {conn: round_trips(rs) for conn, rs in by_conn.items()}
    return Shapes(
        commands=dict(Counter(r.command for r in client)),
        lua_commands=dict(Counter(r.command for r in records if r.lua)),
        families=_families(client),
        roles=_roles(by_conn, steps),
        arguments=_arguments(client),
        field_counts=_field_counts(client),
        blocking=_blocking(client),
        transactions=sum(1 for ss in steps.values() for s in ss if _multi(s)),
        scripts=_scripts(client),
        evalsha=tuple(sorted({str(r.args[0].shape) for r in client if _is_evalsha(r)})),
        redacted_commands=dict(Counter(r.command for r in records if r.redacted)),
    )


def template(record: Observed) -> Template:
    return Template(
        record.command,
        tuple(
            (a.role, a.shape if a.role != keyspecs.VALUE or a.shape else None) for a in record.args
        ),
    )


def _multi(step: list[Observed]) -> bool:
    return bool(step) and step[0].command == "MULTI"


def round_trips(records: list[Observed]) -> list[list[Observed]]:
    """A connection's commands as round trips: MULTI ... EXEC (or DISCARD) together;
    a transaction the sample cut (begun before it, or open at its end) is left out."""
    out: list[list[Observed]] = []
    open_tx: list[Observed] | None = None
    for r in records:
        if r.command == "MULTI":
            open_tx = [r]
        elif open_tx is not None:
            open_tx.append(r)
            if r.command in {"EXEC", "DISCARD"}:
                out.append(open_tx)
                open_tx = None
        elif r.command not in {"EXEC", "DISCARD"}:
            out.append([r])
    return out


def _roles(
    by_conn: dict[str, list[Observed]], steps: dict[str, list[list[Observed]]]
) -> tuple[Role, ...]:
    members: dict[str, list[str]] = defaultdict(list)
    for conn, rs in by_conn.items():
        names = {r.command for r in rs}
        if any(commands.blocks(_words(template(r))) for r in rs):
            role = "consumer"
        elif names <= PUBSUB | {"PING"}:
            role = "subscriber"
        elif names & ENQUEUES:
            role = "producer"
        else:
            role = "client"
        members[role].append(conn)
    roles = []
    for name in ("producer", "consumer", "client", "subscriber"):
        if name in members:
            conns = members[name]
            roles.append(Role(name, tuple(conns), _step_shapes(s for c in conns for s in steps[c])))
    return tuple(roles)


def _step_shapes(steps: Iterable[list[Observed]]) -> tuple[StepShape, ...]:
    """Steps alike (numbers in arguments aside: a HINCRBYFLOAT's amount, a timeout that
    varies) grouped, in the order first seen, each argument at its most common shape."""
    seen: dict[tuple[Template, ...], list[list[Observed]]] = {}
    for step in sorted(steps, key=lambda s: s[0].time):
        seen.setdefault(tuple(_coarse(template(r)) for r in step), []).append(step)
    out = []
    for key, group in seen.items():
        templates = tuple(
            Template(
                t.command,
                tuple(
                    Counter(template(s[i]).args[j] for s in group).most_common(1)[0][0]
                    for j in range(len(t.args))
                ),
            )
            for i, t in enumerate(key)
        )
        sizes = tuple(
            tuple(Sizes.of([s[i].args[j].size for s in group]) for j in range(len(t.args)))
            for i, t in enumerate(key)
        )
        conns = len({s[0].connection for s in group})
        out.append(StepShape(templates, _multi(group[0]), len(group), sizes, conns))
    return tuple(out)


def _coarse(t: Template) -> Template:
    """``t`` with every number (kept or a placeholder) as one shape: steps that differ
    only in them are the same step."""
    return Template(
        t.command,
        tuple(
            (role, "{n}" if shape and _NUMBER.fullmatch(shape) else shape) for role, shape in t.args
        ),
    )


def _families(records: list[Observed]) -> tuple[Family, ...]:
    names: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    calls: Counter[str] = Counter()
    used: dict[str, set[str]] = defaultdict(set)
    literal: dict[str, set[str]] = defaultdict(set)
    for r in records:
        for a in r.args:
            if a.role != keyspecs.KEY:
                continue
            pattern = a.shape or f"{{data:{a.size}}}"
            names[pattern].add(a.ids or (pattern,))
            calls[pattern] += 1
            used[pattern].add(r.command)
            if a.name is not None:
                literal[pattern].add(a.name)
    return tuple(
        Family(
            p, len(names[p]), n, tuple(sorted(used[p])),
            next(iter(literal[p])) if len(literal[p]) == 1 else None,
        )
        for p, n in calls.most_common()
    )  # fmt: skip


def _arguments(records: list[Observed]) -> tuple[Argument, ...]:
    shapes: dict[tuple[str, int], set[str | None]] = defaultdict(set)
    sizes: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in records:
        for i, a in enumerate(r.args, start=1):
            if a.role == keyspecs.KEY or a.role == keyspecs.SCRIPT:
                continue
            shapes[(r.command, i)].add(a.shape if a.role != keyspecs.VALUE else None)
            sizes[(r.command, i)].append(a.size)
    out = []
    for (cmd, pos), seen in sorted(shapes.items()):
        constant = next(iter(seen)) if len(seen) == 1 else None
        if constant is not None and not any(c in constant for c in "{}"):
            out.append(Argument(cmd, pos, constant, None))
        elif None in seen:
            out.append(Argument(cmd, pos, None, Sizes.of(sizes[(cmd, pos)])))
    return tuple(out)


def _field_counts(records: list[Observed]) -> dict[str, Sizes]:
    counts: dict[str, list[int]] = defaultdict(list)
    for r in records:
        if r.command in {"HSET", "HMSET", "HSETNX", "MSET"}:
            counts[r.command].append(len(r.args) // 2)
        elif r.command == "XADD":
            counts[r.command].append(sum(a.role == keyspecs.VALUE for a in r.args))
    return {cmd: Sizes.of(v) for cmd, v in sorted(counts.items())}


def _blocking(records: list[Observed]) -> tuple[Blocking, ...]:
    seen: Counter[tuple[str, str]] = Counter()
    for r in records:
        words = _words(template(r))
        if not commands.blocks(words):
            continue
        at = len(words) - 1  # a command cut short (BLOCK without its time): "?"
        if r.command in commands.SOMETIMES_BLOCKING:
            at = [w.upper() for w in words].index("BLOCK") + 1
        elif r.command in {"BLMPOP", "BZMPOP"}:
            at = 1
        timeout = words[at] if 0 < at < len(words) else "?"
        if r.command in commands.SOMETIMES_BLOCKING:
            timeout += " ms"
        seen[(r.command, timeout)] += 1
    return tuple(Blocking(c, t, n) for (c, t), n in seen.most_common())


def _scripts(records: list[Observed]) -> dict[str, str]:
    bodies = {}
    for r in records:
        for a in r.args:
            if a.role == keyspecs.SCRIPT and a.shape is not None:
                bodies[hashlib.sha1(a.shape.encode()).hexdigest()] = a.shape
    return bodies


def _is_evalsha(r: Observed) -> bool:
    return r.command in {"EVALSHA", "EVALSHA_RO"} and bool(r.args) and r.args[0].shape is not None


def _words(t: Template) -> list[str]:
    return [t.command, *(shape or "" for _, shape in t.args)]
