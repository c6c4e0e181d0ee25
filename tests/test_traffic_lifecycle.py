"""A sampled capture's task lifecycle (traffic/lifecycle_infer.py, lifecyclefile.py) on
constructed MONITOR lines (no server): an RQ-like queue is linked by its job id and written
as a lifecycle that validates; a Celery-like queue whose id lives only in its payload falls
back to the mix with its reason; interleaved connections, a sample that starts mid-task and
hostile streams never break it."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from regtrack.workloads import capture
from regtrack.workloads.files import load_workload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import lifecycle_infer as li
from regtrack.workloads.traffic import lifecyclefile, sampled, sampler
from regtrack.workloads.traffic.monitor_line import parse, quote
from regtrack.workloads.traffic.redaction import Redactor
from tests import tiers
from tests.test_traffic_shapes import line, records

PRODUCER, WORKER, CALLER = "10.0.0.1:100", "10.0.0.2:200", "10.0.0.3:300"
WORKER_ID = "5f0c3e1a9b7d4c2e8f6a1b3c5d7e9f01"  # a worker's name: its own on its connection
SECRET = "pay-Secret-Value-4242"


def _job(i: int) -> str:
    return f"{i:08x}-2d15-4039-bd6b-3055ef3a0726"


def _rq_enqueue(t: float, job: str, addr: str = PRODUCER) -> list[bytes]:
    return [
        line(t, addr, "MULTI"),
        line(t, addr, "SADD", "rq:queues", "rq:queue:default"),
        line(t, addr, "EXEC"),
        line(t, addr, "MULTI"),
        line(t, addr, "HSET", f"rq:job:{job}", "status", "queued", "data", SECRET + "x" * 40),
        line(t, addr, "RPUSH", "rq:queue:default", job),
        line(t, addr, "EXEC"),
    ]


def _rq_cycle(t: float, job: str, addr: str = WORKER) -> list[bytes]:
    worker = f"rq:worker:{WORKER_ID}"
    return [
        line(t, addr, "BLMOVE", "rq:queue:default", "rq:queue:default:im", "LEFT", "RIGHT", "405"),
        line(t + 0.1, addr, "HGETALL", f"rq:job:{job}"),
        line(t + 0.1, addr, "HSET", worker, "last_heartbeat", "2026-12-06T17:00:00.123456Z"),
        line(t + 0.2, addr, "MULTI"),
        line(t + 0.2, addr, "HSET", f"rq:job:{job}", "status", "finished"),
        line(t + 0.2, addr, "ZADD", "rq:finished:default", f"{1765000000 + t:.4f}", job),
        line(t + 0.2, addr, "LREM", "rq:queue:default:im", "1", job),
        line(t + 0.2, addr, "EXEC"),
    ]


def _rq(tasks: int = 12) -> list[bytes]:
    out = [line(0.1, WORKER, "CLIENT", "SETNAME", f"rq:worker:{WORKER_ID}")]
    for i in range(tasks):
        out += _rq_enqueue(1.0 + i, _job(i))
    for i in range(tasks):
        out += _rq_cycle(100.0 + i, _job(i))
        out.append(line(100.5 + i, CALLER, "HGET", f"rq:job:{_job(i)}", "status"))
    return [*out, line(200.0, WORKER, "BLMOVE", "rq:queue:default", "x", "LEFT", "RIGHT", "405")]


def _sampled(lines: list[bytes], keep_names: bool = False) -> sampled.SampledCapture:
    redactor = Redactor(keep_names=keep_names)
    recs = tuple(records(lines, redactor))
    sample = sampler.Sample(recs, 2.0, "count", 0, redactor.secrets_dropped, keep_names, "built-in")
    counted = capture.Capture("redis://h:6379", 2.0, "7.0.15", {"get": 1})
    return sampled.SampledCapture(counted, sample)


def _args(step: li.Step) -> list[str]:
    return [c.name for c in step.commands]


def test_an_rq_like_queue_is_linked_by_its_job_id():
    found = li.infer(records(_rq()))
    assert isinstance(found, li.Inferred), found
    assert [_args(s) for s in found.enqueue] == [
        ["MULTI", "SADD", "EXEC"],
        ["MULTI", "HSET", "RPUSH", "EXEC"],
    ]
    assert found.dequeue.name == "BLMOVE"
    assert [s.shape for s in found.dequeue.slots] == [
        "rq:queue:default", "rq:queue:default:im", "LEFT", "RIGHT", "405",
    ]  # fmt: skip
    assert [_args(s) for s in found.process] == [
        ["HGETALL"], ["HSET"], ["MULTI", "HSET", "ZADD", "LREM", "EXEC"],
    ]  # fmt: skip
    assert found.link == ("rq:job:{uuid}",)
    assert (found.producers, found.consumers) == (1, 1)
    assert found.cycles == (12, 12) and found.enqueues[0] >= 10
    assert "CLIENT x1" in found.left_out
    assert (found.callers, found.others) == (1, 0)  # the caller polling each job's status
    heartbeat = found.process[1].commands[0].slots[0]
    assert heartbeat.shape == "rq:worker:{hex}" and heartbeat.parts == (li.CONSUMER,)


def test_the_rq_like_lifecycle_is_written_and_validates():
    written = lifecyclefile.text(_sampled(_rq()), "rq-sampled", {})
    assert written.kind == "lifecycle" and written.why_not is None
    wl = LifecycleWorkload(**tomllib.loads(written.text))
    assert wl.dequeue.command == [
        "BLMOVE", "rq:queue:default", "rq:queue:default:im", "LEFT", "RIGHT", "405",
    ]  # fmt: skip
    push = wl.enqueue[1].commands
    assert push[0] == ["MULTI"] and push[-1] == ["EXEC"]
    assert push[1][:2] == ["HSET", "rq:job:${task}"] and len(push[1][-1]) == len(SECRET) + 40
    assert push[2] == ["RPUSH", "rq:queue:default", "${task}"]
    assert wl.process[0].commands == [["HGETALL", "rq:job:${task}"]]
    assert wl.process[1].commands[0][1].endswith("${consumer}")
    lrem = wl.process[2].commands[3]
    assert lrem == ["LREM", "rq:queue:default:im", "1", "${task}"]
    assert wl.process[2].commands[2][2] == "${now}"  # the score, a time that varied
    assert wl.engine_document()["lifecycle"]["consumers"] == 1
    for secret in (SECRET, WORKER_ID, "0000000b-2d15", "3055ef3a0726"):
        assert secret not in written.text
    assert "Written as a lifecycle" in written.text and "approximations" in written.text


def test_keep_names_writes_the_keys_that_never_varied_as_seen_and_only_those():
    """--keep-names in the lifecycle form: a queue named after a person stays as seen (the
    user asked for it); a job's key still follows its task, a worker's its consumer."""
    queue = "rq:queue:alice@example.com"
    lines = [ln.replace(b"rq:queue:default", queue.encode()) for ln in _rq()]
    kept = lifecyclefile.text(_sampled(lines, keep_names=True), "rq-kept", {})
    hidden = lifecyclefile.text(_sampled(lines), "rq-hidden", {})
    assert kept.kind == hidden.kind == "lifecycle"
    wl = LifecycleWorkload(**tomllib.loads(kept.text))
    assert wl.dequeue.command[1:3] == [queue, queue + ":im"]
    assert wl.process[0].commands == [["HGETALL", "rq:job:${task}"]]
    assert wl.process[1].commands[0][1].endswith("${consumer}")
    assert WORKER_ID not in kept.text and _job(3) not in kept.text
    assert "never varied kept as seen" in kept.text
    assert "alice" not in hidden.text and "kept as seen" not in hidden.text
    # one consumer alone does not make the queue's name its own: it pops what was pushed
    stand_in = LifecycleWorkload(**tomllib.loads(hidden.text))
    assert stand_in.dequeue.command[1] == stand_in.enqueue[1].commands[2][1]
    assert "${consumer}" not in stand_in.dequeue.command[1]


REPLY_TO = "0a4c160c-496c-3781-a8b5-499bcd8f6953"  # the producer's own, in every message
POP, CHANNEL, BACKEND, SUBSCRIBER = "10.0.0.2:1", "10.0.0.2:2", "10.0.0.2:3", "10.0.0.1:2"


def _tag(i: int) -> str:
    return f"{i:08x}-578d-4467-8b88-02a9bc17bd69"


def _kombu_message(job: str, tag: str) -> str:
    """kombu's message as Celery 5.7 LPUSHes it (benchmarks/results/library_monitor/)."""
    return (
        '{"body": "W1siMTc5NjU3NzMwOS4zNjcxNTEgIC' + "A" * 200 + 'JdLCB7fV0=", '
        '"content-encoding": "utf-8", "headers": {"lang": "py", "task": "echo", "id": "'
        + job + '", "retries": 0, "root_id": "' + job + '", "argsrepr": "(\'' + SECRET
        + '\',)", "origin": "gen27856@vm"}, "properties": {"correlation_id": "' + job
        + '", "reply_to": "' + REPLY_TO + '", "delivery_tag": "' + tag + '"}}'
    )  # fmt: skip


def _celery(tasks: int = 12, ids: bool = True) -> list[bytes]:
    """Celery's traffic as MONITOR shows it: the producer's LPUSH (and its result
    consumer's SUBSCRIBE), the worker's BRPOP on a connection of its own, the unacked
    bookkeeping on the channel's, the result on the backend's, the ack."""
    out = [line(0.5, CHANNEL, "MULTI"), line(0.5, CHANNEL, "LLEN", "celery"),
           line(0.5, CHANNEL, "EXEC")]  # fmt: skip
    for i in range(tasks):
        t, job, tag = 1.0 + i, _job(i), _tag(i)
        message = _kombu_message(job, tag) if ids else '{"body": "' + "A" * 900 + '"}'
        out += [
            line(t, SUBSCRIBER, "SUBSCRIBE", f"celery-task-meta-{job}"),
            line(t + 0.001, PRODUCER, "LPUSH", "celery", message),
            line(t + 0.002, SUBSCRIBER, "UNSUBSCRIBE", f"celery-task-meta-{job}"),
            line(t + 0.003, CHANNEL, "MULTI"),
            line(t + 0.003, CHANNEL, "ZADD", "unacked_index", f"{1796577311 + t:.7f}", tag),
            line(t + 0.003, CHANNEL, "HSET", "unacked", tag, "[" + message + ', "", "celery"]'),
            line(t + 0.003, CHANNEL, "EXEC"),
            line(t + 0.004, BACKEND, "GET", f"celery-task-meta-{job}"),
            line(t + 0.005, BACKEND, "MULTI"),
            line(t + 0.005, BACKEND, "SETEX", f"celery-task-meta-{job}", "86400", "r" * 250),
            line(t + 0.005, BACKEND, "PUBLISH", f"celery-task-meta-{job}", "r" * 250),
            line(t + 0.005, BACKEND, "EXEC"),
            line(t + 0.006, CHANNEL, "MULTI"),
            line(t + 0.006, CHANNEL, "ZREM", "unacked_index", tag),
            line(t + 0.006, CHANNEL, "HDEL", "unacked", tag),
            line(t + 0.006, CHANNEL, "EXEC"),
            line(t + 0.007, POP, "BRPOP", "celery", "celery\x06\x163", "1"),
        ]
        if i == 5:  # an idle pop timing out, the heartbeat on a connection of its own
            out.append(line(t + 0.5, POP, "BRPOP", "celery", "celery\x06\x163", "1"))
            out.append(line(t + 0.5, "10.0.0.2:9", "PUBLISH", "/0.celeryev/worker.heartbeat",
                            "h" * 300))  # fmt: skip
    return [line(0.9, POP, "BRPOP", "celery", "celery\x06\x163", "1"), *out]


def test_a_celery_like_queue_is_linked_by_the_ids_inside_its_message():
    found = li.infer(records(_celery()))
    assert isinstance(found, li.Inferred), found
    # the result consumer's subscription (its own connection) where it began; RESP2 sends
    # nothing else on a subscribed connection, so its UNSUBSCRIBE goes with it
    assert [_args(s) for s in found.enqueue] == [["SUBSCRIBE"], ["UNSUBSCRIBE"], ["LPUSH"]]
    assert found.enqueue[2].commands[0].slots[1].payload
    # only the first task's, whose enqueue the sample may have cut, is left out
    assert [x for x in found.left_out if "SUBSCRIBE" in x] == ["SUBSCRIBE x1", "UNSUBSCRIBE x1"]
    assert found.dequeue.name == "BRPOP"
    assert [_args(s) for s in found.process] == [
        ["MULTI", "ZADD", "HSET", "EXEC"], ["GET"], ["MULTI", "SETEX", "PUBLISH", "EXEC"],
        ["MULTI", "ZREM", "HDEL", "EXEC"],
    ]  # fmt: skip
    assert found.cycles[0] >= 10 and found.enqueues[0] >= 10
    assert found.link == ("celery-task-meta-{uuid}",)
    assert (found.producers, found.consumers, found.helpers) == (1, 1, 2)
    hset = found.process[0].commands[2].slots
    assert hset[1].parts == (li.TASK,) and not hset[2].payload  # the tag; a value of its own


def test_the_celery_like_lifecycle_is_written_with_its_message_and_keeps_no_id():
    written = lifecyclefile.text(_sampled(_celery()), "celery-sampled", {})
    assert written.kind == "lifecycle", written.why_not
    wl = LifecycleWorkload(**tomllib.loads(written.text))
    assert [step.commands for step in wl.enqueue] == [
        [["SUBSCRIBE", "celery-task-meta-${task}"]],
        [["UNSUBSCRIBE", "celery-task-meta-${task}"]], [["LPUSH", "celery", "${payload}"]],
    ]  # fmt: skip
    assert wl.extra_commands == ["SUBSCRIBE", "UNSUBSCRIBE"]
    assert wl.data_size == len(_kombu_message(_job(0), _tag(0)))
    assert wl.dequeue.command == ["BRPOP", "celery", "celery\x06\x163", "1"]
    process = [c for step in wl.process for c in step.commands]
    assert ["GET", "celery-task-meta-${task}"] in process
    assert ["ZREM", "unacked_index", "${task}"] in process  # the delivery tag: the task's
    assert ["HDEL", "unacked", "${task}"] in process
    assert process[1][:3] == ["ZADD", "unacked_index", "${now}"]
    setex = next(c for c in process if c[0] == "SETEX")
    assert setex[1:3] == ["celery-task-meta-${task}", "86400"] and len(setex[3]) == 250
    assert "(inside its message)" in written.text
    # no id of the message's, nor its text, reaches the file
    for secret in (SECRET, REPLY_TO, "gen27856", "W1siMTc5", "02a9bc17bd69", "3055ef3a0726"):
        assert secret not in written.text


def test_real_celery_traffic_recorded_by_monitor_is_its_lifecycle():
    """MONITOR of real Celery 5.7 (kombu 5.7, a solo worker, Redis 7.0.15), as recorded
    for the preset: the same 17 commands per task as configs/workloads/celery.toml."""
    log = Path(__file__).parent.parent / "benchmarks/results/library_monitor/celery.log"
    lines = log.read_bytes().splitlines()
    written = lifecyclefile.text(_sampled(lines), "celery-sampled", {})
    assert written.kind == "lifecycle", written.why_not
    wl = LifecycleWorkload(**tomllib.loads(written.text))
    preset = load_workload("celery")
    assert isinstance(preset, LifecycleWorkload)

    def names(w: LifecycleWorkload) -> Counter[str]:
        return Counter(a[0] for _, a in w.located_args())

    assert names(wl) == names(preset)  # 17 per task, the pop one of them
    assert wl.dequeue.command == preset.dequeue.command
    assert 1100 <= wl.data_size <= 1200  # kombu's message with a 100-byte argument
    ids = {m for x in lines for m in re.findall(rb"[0-9a-f]{8}-[0-9a-f-]{27}", x)}
    assert len(ids) > 10 and not [i for i in ids if i.decode() in written.text]


def test_a_worker_behind_its_producer_by_more_than_the_sample_is_its_own_reason():
    """The consumer works only on tasks pushed before the sample; those pushed in it wait."""
    early = {_job(i).encode() for i in range(6)} | {_tag(i).encode() for i in range(6)}
    late = {_job(i).encode() for i in range(6, 12)} | {_tag(i).encode() for i in range(6, 12)}
    lines = [
        x for x in _celery()
        if not (b'"LPUSH"' in x and any(i in x for i in early))
        and not (b'"LPUSH"' not in x and any(i in x for i in late))
    ]  # fmt: skip
    found = li.infer(records(lines))
    assert isinstance(found, li.NotInferred) and "wait in the queue" in found.reason


def test_a_message_with_no_id_inside_still_falls_back_with_its_reason():
    lines = _celery(ids=False)
    found = li.infer(records(lines))
    assert isinstance(found, li.NotInferred)
    assert found.reason.startswith("the elements pushed to celery, celery\x06\x163 are not ids")
    assert "hold none" in found.reason
    written = lifecyclefile.text(_sampled(lines), "celery-sampled", {})
    assert written.kind == "mix" and written.why_not == found.reason
    MixWorkload(**tomllib.loads(written.text))
    assert SECRET not in written.text


def test_an_id_in_every_message_links_nothing():
    """The producer's reply queue, in each message and named by no consumer: not a task's."""
    lines = []
    for i in range(8):
        t = 1.0 + i
        message = '{"reply_to": "' + REPLY_TO + f'", "n": {i}, "pad": "' + "p" * 300 + '"}'
        lines += [line(t, PRODUCER, "LPUSH", "q", message), line(t, WORKER, "BRPOP", "q", "1"),
                  line(t, WORKER, "GET", f"meta-{REPLY_TO}")]  # fmt: skip
    found = li.infer(records(lines))
    assert isinstance(found, li.NotInferred) and "hold none" in found.reason


def test_no_blocking_pop_and_no_push_are_each_their_own_reason():
    polls = [line(1.0 + i, WORKER, "LPOP", "q") for i in range(5)]
    assert "no blocking pop" in li.infer(records(polls)).reason  # type: ignore[union-attr]
    idle = [line(1.0 + i, WORKER, "BRPOP", "q", "1") for i in range(5)]
    idle += [line(1.0 + i, PRODUCER, "RPUSH", "other", _job(i)) for i in range(5)]
    assert "no connection pushed to q" in li.infer(records(idle)).reason  # type: ignore[union-attr]


def test_interleaved_connections_and_a_sample_that_starts_mid_task():
    """Two producers and two workers, their commands interleaved in time; the sample
    begins inside a worker's task (no pop before its first commands) and inside an
    enqueue's transaction (its MULTI not seen), and ends inside a cycle."""
    per: dict[str, list[bytes]] = {}
    producers, workers = ["10.0.0.1:1", "10.0.0.1:2"], ["10.0.0.2:1", "10.0.0.2:2"]
    for i in range(16):
        per.setdefault(producers[i % 2], []).extend(_rq_enqueue(1.0 + i, _job(i), producers[i % 2]))
        per.setdefault(workers[i % 2], []).extend(_rq_cycle(1.5 + i, _job(i), workers[i % 2]))
    per[producers[0]] = per[producers[0]][5:]  # mid-transaction: HSET RPUSH EXEC of job 0
    per[workers[0]] = per[workers[0]][1:]  # mid-task: job 0's steps without its pop
    per[workers[1]] = per[workers[1]][:-3]  # the sample ends inside job 15's transaction
    merged = sorted(
        (x for lines in per.values() for x in lines), key=lambda b: float(b.split(b" ", 1)[0])
    )
    found = li.infer(records(merged))
    assert isinstance(found, li.Inferred), found
    assert (found.producers, found.consumers) == (2, 2)
    assert [_args(s) for s in found.process] == [
        ["HGETALL"], ["HSET"], ["MULTI", "HSET", "ZADD", "LREM", "EXEC"],
    ]  # fmt: skip
    assert [_args(s) for s in found.enqueue][-1] == ["MULTI", "HSET", "RPUSH", "EXEC"]
    heartbeat = found.process[1].commands[0].slots[0]
    assert heartbeat.parts == (li.CONSTANT,)  # both workers shared WORKER_ID here
    assert lifecyclefile.text(_sampled(merged), "q", {}).kind == "lifecycle"


_WORDS = st.sampled_from(
    ["BLMOVE", "BRPOP", "RPUSH", "LPUSH", "MULTI", "EXEC", "HSET", "HGETALL", "GET",
     "XREADGROUP", "BLOCK", "q", "rq:job:" + _job(1), _job(1), _job(2), "405", "0", "${x}",
     "CLIENT", "AUTH", "EVALSHA", "a" * 40, "\x00\x06\x16"]
)  # fmt: skip


@settings(max_examples=tiers.examples(500), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a:1", "b:2", "lua"]), st.lists(_WORDS, min_size=1, max_size=6)),
        max_size=40,
    )
)
def test_odd_streams_give_a_lifecycle_that_validates_or_a_reason(stream):
    lines = [
        f"{1.0 + i:.6f} [0 {addr}] ".encode() + b" ".join(quote(w.encode()) for w in words)
        for i, (addr, words) in enumerate(stream)
    ]
    redactor = Redactor()
    recs = [r for r in (parse(x, redactor) for x in lines) if r is not None]
    found = li.infer(recs)
    assert isinstance(found, li.Inferred | li.NotInferred)
    if recs and any(not r.lua for r in recs):
        sample = sampler.Sample(tuple(recs), 1.0, "count", 0, 0, False, "built-in")
        got = sampled.SampledCapture(capture.Capture("redis://h:1", 1.0, "7.0.15", {}), sample)
        try:
            written = lifecyclefile.text(got, "q", {})
        except Exception as exc:  # the mix's own refusals (nothing replayable) are CannotMeasure
            assert type(exc).__name__ == "CannotMeasure", exc
            return
        if written.kind == "lifecycle":
            LifecycleWorkload(**tomllib.loads(written.text))
        else:
            MixWorkload(**tomllib.loads(written.text))
