from pathlib import Path

import pytest

from regtrack.bench.loadgen import redis_benchmark
from regtrack.bench.loadgen.base import Aim, LoadgenBinary
from regtrack.core.cpus import CpuPlan
from regtrack.core.errors import BadInput
from regtrack.core.records import LoadSpec, MixCommand

FIXTURES = Path(__file__).parent / "fixtures" / "redis-benchmark"


def test_parse_real_get_output():
    text = (FIXTURES / "get_r7.0.15_P10_c50_d1000_r100000_n5500000.csv").read_text()
    rows = redis_benchmark.parse_csv(text)
    assert rows == {
        "GET": {
            "rps": 590002.19,
            "avg": 0.768,
            "min": 0.224,
            "p50": 0.751,
            "p95": 1.007,
            "p99": 1.119,
            "max": 5.151,
        }
    }


def test_parse_multi_test_and_custom_command_output():
    multi = redis_benchmark.parse_csv(
        (FIXTURES / "multi_test_set_get_r7.0.15_P1_c50_d1000_r100000_n300000.csv").read_text()
    )
    assert list(multi) == ["SET", "GET"]
    assert multi["GET"]["rps"] == 99900.10
    custom = redis_benchmark.parse_csv(
        (FIXTURES / "custom_XADD_q_star_f_v_r7.0.15_P1_c50_n500000.csv").read_text()
    )
    assert custom["XADD q * f v"]["p99"] == 0.383


def test_parse_garbage_gives_nothing():
    assert redis_benchmark.parse_csv("") == {}
    assert redis_benchmark.parse_csv("Error: Connection refused\n") == {}
    assert redis_benchmark.parse_csv('"test","rps"\n"GET","abc"\n') == {}


def test_argv_is_pinned_and_complete():
    binary = LoadgenBinary("redis-benchmark", "/usr/bin/redis-benchmark", "7.0.15", "0" * 64)
    plan = CpuPlan(server=(0,), client=(1, 2, 3))
    spec = LoadSpec(clients=50, threads=1, pipeline=10, data_size=1000, key_min=0,
                    key_max=99999, key_prefix="key:")  # fmt: skip
    aim = Aim(binary, "127.0.0.1", 7000, plan.client)
    argv = redis_benchmark.argv(aim, spec, 12345)
    assert argv[1:3] == ["-c", "1-3"] and argv[0].endswith("taskset")
    joined = " ".join(argv[3:])
    assert joined == (
        "/usr/bin/redis-benchmark -h 127.0.0.1 -p 7000 -c 50 -n 12345 -P 10 -d 1000 "
        "-r 100000 -t get --csv"
    )
    threaded = LoadSpec(clients=50, threads=2, pipeline=1, data_size=10, key_min=0, key_max=9)
    assert redis_benchmark.argv(aim, threaded, 1)[-2:] == ["--threads", "2"]


def test_a_mix_is_refused():
    binary = LoadgenBinary("redis-benchmark", "/usr/bin/redis-benchmark", "7.0.15", "0" * 64)
    spec = LoadSpec(clients=1, threads=1, pipeline=1, data_size=1, key_min=1, key_max=2,
                    commands=(MixCommand(("SET", "k", "v")),))  # fmt: skip
    with pytest.raises(BadInput, match="cannot replay a command mix"):
        redis_benchmark.argv(Aim(binary, "127.0.0.1", 1, (1,)), spec, 1)
