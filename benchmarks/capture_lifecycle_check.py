#!/usr/bin/env python3
"""A real library's traffic captured as a lifecycle, checked against that library (issue 49).

A redis-server on CPU 0 (tests/library_traffic.py's), the library's driver (a producer
and a worker, examples/drivers/) on CPU 1 at --rate tasks/s; while it runs, `regtrack mix
capture --sample` as a user runs it. The file written (a lifecycle where the sample links
the tasks, else a mix) is then held to the real library the way each preset is
(tests/library_check.py): the same tasks through the real driver and through the file on
the open-loop engine, commands per task command by command, and server CPU per task,
--repeat times. Prints the capture's output, the file's header and every check; asserts
nothing.

    .venv/bin/python benchmarks/capture_lifecycle_check.py [--library rq] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import library_check
from tests import library_traffic as lt


def capture(library: str, rate: float, sample: float, out: Path) -> str:
    """`mix capture --sample` of the real library's traffic into ``out``; its output."""
    tasks = int(rate * (sample + 4))
    with lt.server() as srv:
        driver = lt.start_driver(library, tasks, srv, rate)
        try:
            time.sleep(1.0)  # the worker started and working
            args = ["mix", "capture", "--url", srv.url, "--sample", f"{sample:g}",
                    "--out", str(out)]  # fmt: skip
            done = subprocess.run(
                [sys.executable, "-m", "regtrack", *args], capture_output=True, text=True,
                check=False, timeout=120,
            )  # fmt: skip
        finally:
            driver.communicate(timeout=120)
    shown = " ".join(a if "://" not in a else "redis://127.0.0.1:PORT/0" for a in args)
    return f"$ regtrack {shown}\n{done.stdout}{done.stderr}(exit {done.returncode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", default="rq")
    parser.add_argument("--rate", type=float, default=150.0, help="tasks/s while sampled")
    parser.add_argument("--sample", type=float, default=1.5, help="mix capture --sample")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=1100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{args.library}-sampled.toml"
        print(capture(args.library, args.rate, args.sample, out))
        text = out.read_text()
        print("\n".join(line for line in text.splitlines()[:12] if line.startswith("#")))
        if 'kind = "lifecycle"' not in text:
            print("written as a mix: the check holds lifecycles only")
            return
        checks = [
            library_check.check(args.library, args.small, args.large, str(out))
            for _ in range(args.repeat)
        ]
    for c in checks:
        print(c.table())
    real = [c.real_cpu_us for c in checks]
    file = [c.preset_cpu_us for c in checks]
    mr, mf = statistics.median(real), statistics.median(file)
    print(
        f"median server CPU per task: real {mr:.1f} us, captured lifecycle {mf:.1f} us "
        f"({100 * (mf - mr) / mr:+.1f}%; within {library_check.CPU_PCT:g}%: "
        f"{'yes' if abs(mf - mr) / mr <= library_check.CPU_PCT / 100 else 'no'}); commands "
        f"within {library_check.COMMANDS_PCT:g}% per task in every repetition: "
        f"{'yes' if all(c.commands_ok for c in checks) else 'no'}"
    )


if __name__ == "__main__":
    main()
