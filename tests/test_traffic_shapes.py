"""The traffic sample's parser, redaction and inference on constructed MONITOR lines (no
server): hostile lines never raise, escapes round-trip, secrets never pass the parse,
shapes (families, sizes, transactions, blocking pops, scripts) come out as seen."""

from __future__ import annotations

import hashlib
import re
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regtrack.core.errors import BadInput
from regtrack.workloads import capture
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import keyspecs, mixfile, sampled, sampler
from regtrack.workloads.traffic.monitor_line import parse, quote, words
from regtrack.workloads.traffic.redaction import Redactor
from regtrack.workloads.traffic.shapes import infer
from tests import tiers

PASSWORD = "hunter2-Secret-77"
TOKEN = "tok9f8A7b6C5d4E3f2A1b0C9d8E7f6A5"
PERSON = "user:alice@example.com:session"


def line(t: float, addr: str, *args: bytes | str, db: int = 0) -> bytes:
    parts = [quote(a if isinstance(a, bytes) else a.encode()) for a in args]
    return f"{t:.6f} [{db} {addr}] ".encode() + b" ".join(parts)


def records(lines: list[bytes], redactor: Redactor | None = None):
    redactor = redactor or Redactor()
    out = [parse(x, redactor) for x in lines]
    assert all(o is not None for o in out), lines
    return out


@settings(max_examples=tiers.examples(1000), deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=8))
def test_quoted_words_round_trip_whatever_bytes_they_hold(args):
    assert words(b" ".join(quote(a) for a in args)) == args


@settings(max_examples=tiers.examples(2000), deadline=None)
@given(st.binary(max_size=200), st.sampled_from([b"", b"1.5 [0 lua] ", b"1.0 [3 1.2.3.4:5] "]))
def test_any_line_is_a_record_or_none_never_an_error(tail, head):
    found = parse(head + tail, Redactor())
    assert found is None or (head and found.command == found.command.upper())


def test_lua_unix_sockets_dbs_and_escapes_are_read():
    lua, unix, esc = records(
        [
            line(1.5, "lua", "GET", "k"),
            line(2.0, "unix:/tmp/redis.sock", "PING", db=3),
            b'3.0 [0 127.0.0.1:5] "SET" "a\\"b\\\\c" "\\x00\\xff\\n"',
        ]
    )
    assert lua.lua and lua.connection == "lua" and lua.command == "GET"
    assert unix.db == 3 and unix.connection == "c1" and not unix.lua
    assert esc.command == "SET" and [a.size for a in esc.args] == [5, 3]
    assert esc.args[0].role == keyspecs.KEY and esc.args[1].role == keyspecs.VALUE
    for bad in [b'1.0 [0 x] "GET" "k', b'1.0 [0 x] "GET" "\\q"', b"+OK", b'1.0 [0 x] "G" "\\x4"']:
        assert parse(bad, Redactor()) is None


def test_credentials_and_personal_data_never_pass_the_parse():
    redactor = Redactor()
    seen = records(
        [
            line(1, "1.1.1.1:1", "AUTH", "default", PASSWORD),
            line(1, "1.1.1.1:1", "HELLO", "3", "AUTH", "default", PASSWORD),
            line(1, "1.1.1.1:1", "CONFIG", "SET", "requirepass", PASSWORD),
            line(1, "1.1.1.1:1", "SET", PERSON, TOKEN),
            line(1, "1.1.1.1:1", "HSET", "session:" + TOKEN, "token", TOKEN),
        ],
        redactor,
    )
    text = repr(seen)
    for secret in (PASSWORD, TOKEN, "alice", "example.com"):
        assert secret not in text
    assert [s.redacted for s in seen] == [True, True, True, False, False]
    assert redactor.secrets_dropped == 3
    assert seen[3].args[0].shape == "user:{email}:session" and seen[3].args[1].shape == "{token}"
    assert seen[4].args[0].shape == "session:{token}" and seen[4].args[1].shape == "token"


def test_pseudonyms_are_stable_in_a_capture_and_differ_between_captures():
    job = "c5bdd212-2d15-4039-bd6b-3055ef3a0726"
    lines = [line(1, "a:1", "RPUSH", "q", job), line(2, "b:2", "HGETALL", f"rq:job:{job}")]
    one, two = records(lines), records(lines)
    assert one[0].args[1].shape == "{uuid}" and one[1].args[0].shape == "rq:job:{uuid}"
    assert one[0].args[1].ids == one[1].args[0].ids  # the producer's id is the consumer's
    assert one[0].args[1].ids != two[0].args[1].ids
    kept = records(lines[1:], Redactor(keep_names=True))[0].args[0]
    assert kept.name == f"rq:job:{job}" and records(lines[1:])[0].args[0].name is None


def test_a_pushed_message_keeps_the_pseudonyms_of_its_ids_and_nothing_of_its_text():
    """kombu's message holds its task id: the push keeps that id's pseudonym (the same as
    the consumer's key part), never the id, the message's text or where the id sat."""
    job = "c5bdd212-2d15-4039-bd6b-3055ef3a0726"
    message = '{"id": "' + job + '", "personal_field": ["' + PASSWORD + '", "' + TOKEN + '"]}'
    lines = [line(1, "a:1", "LPUSH", "celery", message),
             line(2, "b:2", "GET", f"celery-task-meta-{job}"),
             line(3, "a:1", "SET", "k", message)]  # fmt: skip
    push, get, stored = records(lines)
    value = push.args[1]
    assert value.shape is None and value.size == len(message)
    assert value.inner[0] == get.args[0].ids[0] and len(value.inner) == 2  # the id, the token
    assert stored.args[1].inner == ()  # a stored value is not a queue's message
    for secret in (job, PASSWORD, TOKEN, "personal_field", "c5bdd212"):
        assert secret not in repr(push)


def _queue_traffic() -> list[bytes]:
    body = "return redis.call('LLEN', KEYS[1])"
    out = [line(0.5, "9.9.9.9:1", "SCRIPT", "LOAD", body)]
    for i in range(20):
        job = f"{i:08x}-2d15-4039-bd6b-3055ef3a0726"
        p, c, t = "10.0.0.1:100", "10.0.0.2:200", 1.0 + i
        fields = ["status", "queued", "data", "x" * (300 + i), "origin", "default"]
        out += [
            line(t, p, "MULTI"),
            line(t, p, "HSET", f"rq:job:{job}", *fields),
            line(t, p, "RPUSH", "rq:queue:default", job),
            line(t, p, "EXEC"),
            line(t, c, "BLMOVE", "rq:queue:default", "rq:wip", "LEFT", "RIGHT", "405"),
            line(t, c, "HGETALL", f"rq:job:{job}"),
            line(t, c, "XREADGROUP", "GROUP", "g", "w1", "COUNT", "100", "STREAMS", "s", ">"),
            line(t, c, "EVALSHA", hashlib.sha1(body.encode()).hexdigest(), "1", "rq:wip"),
            line(t, "lua", "LLEN", "rq:wip"),
        ]
    return out


def test_inference_finds_families_transactions_blocking_pops_and_scripts():
    shapes = infer(records(_queue_traffic()))
    families = {f.pattern: f for f in shapes.families}
    assert families["rq:job:{uuid}"].cardinality == 20
    assert families["rq:queue:default"].cardinality == 1
    assert shapes.transactions == 20
    assert [(b.command, b.timeout, b.calls) for b in shapes.blocking] == [("BLMOVE", "405", 20)]
    assert shapes.field_counts["HSET"].median == 3
    constants = {(a.command, a.position): a.constant for a in shapes.arguments}
    assert constants[("XREADGROUP", 5)] == "100" and constants[("BLMOVE", 5)] == "405"
    sizes = {(a.command, a.position): a.sizes for a in shapes.arguments if a.sizes}
    assert sizes[("HSET", 5)].low == 300 and sizes[("HSET", 5)].high == 319
    assert shapes.lua_commands == {"LLEN": 20}
    roles = {r.name: r for r in shapes.roles}
    assert set(roles) == {"producer", "consumer", "client"}
    (tx,) = roles["producer"].steps
    assert tx.transaction and [t.command for t in tx.templates] == [
        "MULTI",
        "HSET",
        "RPUSH",
        "EXEC",
    ]


def _written(lines: list[bytes], scripts: dict[str, str] | None = None) -> str:
    redactor = Redactor()
    recs = tuple(records(lines, redactor))
    sample = sampler.Sample(recs, 2.0, "count", 0, redactor.secrets_dropped, False, "built-in")
    counted = capture.Capture("redis://h:6379", 2.0, "7.0.15", {"get": 1})
    return mixfile.text(sampled.SampledCapture(counted, sample), "q", scripts or {})


def test_the_written_mix_keeps_transactions_blocking_pops_sizes_and_scripts():
    text = _written(_queue_traffic())
    mix = MixWorkload(**tomllib.loads(text))
    # ids padded to their seen length: "rq:job:" + zeros + memtier's key number
    procs = {
        p.name: [[re.sub("0*__key__", "__key__", a) for a in c.args] for c in p.commands]
        for p in mix.processes
    }
    assert len(mix.process[0].commands[1].args[1]) == len("rq:job:") + 36 - len("20") + 7
    assert [a[0] for a in procs["producer"]] == ["MULTI", "HSET", "RPUSH", "EXEC"]
    hset = procs["producer"][1]
    assert hset[1] == "rq:job:__key__" and len(hset) == 8 and len(hset[5]) == 309
    assert procs["producer"][2] == ["RPUSH", "rq:queue:default", "__key__"]
    assert procs["consumer-blocking"] == [
        ["BLMOVE", "rq:queue:default", "rq:wip", "LEFT", "RIGHT", "1"]
    ]
    assert ["EVALSHA", "${script_1}", "1", "rq:wip"] in procs["consumer"]
    assert mix.setup[0].command[:2] == ["SCRIPT", "LOAD"] and mix.min_redis == "6.2"
    assert all(c.key_pattern == "P" for c in mix.process[0].commands)
    assert "BLMOVE 405 x20" in text and "rq:job:{uuid}: 20 names" in text


def test_evalsha_without_its_body_is_refused_in_one_line_unless_given():
    body = "return 1"
    sha = hashlib.sha1(body.encode()).hexdigest()
    lines = [line(1.0 + i, "a:1", "EVALSHA", sha, "0") for i in range(3)]
    lines += [line(1.0 + i, "a:1", "GET", "k") for i in range(3)]
    text = _written(lines)
    assert f"# Refused: EVALSHA {sha}: its body was not in the sample (give --script" in text
    assert "EVALSHA" not in "".join(x for x in text.splitlines() if x.startswith("args"))
    assert '"EVALSHA", "${script_1}", "0"' in _written(lines, {sha: body})


def test_script_option_checks_the_sha(tmp_path):
    f = tmp_path / "s.lua"
    f.write_text("return 1")
    sha = hashlib.sha1(b"return 1").hexdigest()
    assert sampled.scripts((f"{sha}={f}",)) == {sha: "return 1"}
    with pytest.raises(BadInput, match="not that script"):
        sampled.scripts((f"{'0' * 40}={f}",))
    with pytest.raises(BadInput, match="SHA=FILE"):
        sampled.scripts(("nonsense",))


def test_kombu_priority_queues_stay_keys_of_their_own():
    """Celery's BRPOP names each queue and its priority queues (name, \\x06\\x16, the
    priority): four constant keys, not one family of three; an id beside a separator is
    still an id."""
    queues = [b"celery", b"celery\x06\x163", b"celery\x06\x166", b"celery\x06\x169"]
    lines = [line(1.0 + i, "127.0.0.1:5000", b"BRPOP", *queues, b"1") for i in range(5)]
    uuid = b"0f8e2a1c-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
    lines.append(line(9.0, "127.0.0.1:5001", b"LPUSH", b"q\x06\x16" + uuid, b"v"))
    lines.append(line(9.5, "127.0.0.1:5001", b"LPUSH", b"q\x06\x16" + b"4155550123", b"v"))
    shapes = infer(records(lines))
    families = {f.pattern: f.cardinality for f in shapes.families}
    assert {q.decode("latin-1") for q in queues} <= set(families), families
    assert all(families[q.decode("latin-1")] == 1 for q in queues)
    assert not any("{int}" in p for p in families if p.startswith("celery")), families
    assert families["q\x06\x16{uuid}"] == 1, "not a priority: its id is redacted"
    assert families["q\x06\x16{int}"] == 1, "a long number is an id, not a priority"
    mix = MixWorkload(**tomllib.loads(_written(lines)))
    brpop = [c.args for p in mix.processes for c in p.commands if c.args[0] == "BRPOP"]
    assert brpop and brpop[0][1:5] == [q.decode("latin-1") for q in queues], brpop
