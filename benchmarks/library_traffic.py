#!/usr/bin/env python3
"""What each real task-queue library sends to Redis per task, and what it costs the server.

For each library (examples/drivers/: Celery, RQ, taskiq-redis, arq, Dramatiq), runs its
driver against a fresh Debian redis-server (CPU 0; the driver on CPU 1) with --small and
--large tasks enqueued at once, and prints per task, from the difference of the two runs
(tests/library_traffic.py): the calls of each command as INFO commandstats names them,
their total, the server's CPU (INFO used_cpu_user + used_cpu_sys) and the connections it
accepted. With --repeat R the measurement is repeated R times and each figure's spread
(max - min) is printed. A last run of --monitor-tasks tasks under MONITOR shows the blocking
commands and the timeouts they carried (and is written to --monitor-dir if given; --repeat 0
makes only that run). benchmarks/results/library_monitor/ holds the captures of

    benchmarks/library_traffic.py --repeat 0 --monitor-tasks 6 --monitor-rate 0.5 \
        --monitor-dir benchmarks/results/library_monitor

    PYTHONPATH=$PWD benchmarks/library_traffic.py --repeat 2 \
        | tee benchmarks/results/library_traffic.txt

Asserts nothing. Commandstats counts the commands a Lua script runs as well as the
EVALSHA that ran it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tests import library_traffic as lt


def _row(label: str, values: list[float], digits: int = 3) -> None:
    cells = "  ".join(f"{v:8.{digits}f}" for v in values)
    print(f"  {label:32} {cells}  {max(values) - min(values):7.{digits}f}")


def _table(results: list[lt.LibraryTraffic], repeat: int) -> None:
    """Each repetition's per-task figures side by side, with their spread."""
    for r in results:
        for run in r.runs:
            if run.exit_code != 0 or run.task_lines != run.tasks or not run.done_line:
                print(f"  ! run of {run.tasks}: exit {run.exit_code}, {run.task_lines} task "
                      f"lines, done line {run.done_line}: {run.stderr[-500:]}")  # fmt: skip
        print(f"  runs of {r.runs[0].tasks} / {r.runs[1].tasks} tasks took "
              f"{r.runs[0].seconds:.2f} / {r.runs[1].seconds:.2f} s")  # fmt: skip
    names = sorted(
        {name for r in results for name in r.commands_per_task},
        key=lambda n: (-sum(r.commands_per_task.get(n, 0) for r in results), n),
    )
    runs = "  ".join(f"{'run ' + str(i + 1):>8}" for i in range(repeat))
    print(f"  {'command (calls per task)':32} {runs}  {'spread':>7}")
    for name in names:
        _row(name, [r.commands_per_task.get(name, 0.0) for r in results])
    _row("total commands", [r.total_per_task for r in results])
    _row("server CPU µs", [r.server_cpu_us_per_task for r in results], 1)
    _row("connections accepted", [r.connections_per_task for r in results])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--monitor-tasks", type=int, default=5)
    parser.add_argument("--monitor-rate", type=float, help="tasks/s of the MONITOR run")
    parser.add_argument("--monitor-dir", type=Path, help="write each MONITOR capture here")
    parser.add_argument("libraries", nargs="*", default=list(lt.LIBRARIES))
    args = parser.parse_args()
    server_version = subprocess.run(
        [lt.REDIS_SERVER, "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[2]
    print(f"redis-server {server_version} ({lt.REDIS_SERVER}) on CPU {lt.SERVER_CPU}, "
          f"driver on CPU {lt.DRIVER_CPU}; per task = (run of {args.large} - run of "
          f"{args.small}) / {args.large - args.small}, all enqueued at once; "
          f"{args.repeat} repetition(s)")  # fmt: skip
    for library in args.libraries:
        results = [lt.measure(library, args.small, args.large) for _ in range(args.repeat)]
        print(f"\n{library} ({lt.LIBRARIES[library]} {lt.library_version(library)}), "
              f"driver {lt.driver_path(library).name}")  # fmt: skip
        if results:
            _table(results, args.repeat)
        with lt.server() as srv, lt.monitor(srv) as lines:
            run = lt.run_driver(library, args.monitor_tasks, srv, args.monitor_rate)
        blocking = lt.blocking_calls(lines)
        seen = "; ".join(f"{c} timeout {', '.join(sorted(t))}" for c, t in sorted(blocking.items()))
        print(f"  blocking (MONITOR, {args.monitor_tasks} tasks, exit {run.exit_code}): "
              f"{seen or 'none'}")  # fmt: skip
        if args.monitor_dir:
            args.monitor_dir.mkdir(parents=True, exist_ok=True)
            (args.monitor_dir / f"{library}.log").write_text("\n".join(lines) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
