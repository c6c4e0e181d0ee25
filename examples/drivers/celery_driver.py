"""Celery: N no-op tasks through the Redis broker, results in the Redis result backend.

A regtrack driver: the server's address comes in REDIS_URL. This process is the producer
(echo.delay); its child, started from this file with --worker, is Celery's worker with the
solo pool and its default settings. The child prints a JSON line per task whose result is
stored; this process passes them on, stops the worker after N, and prints one for the end.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from celery import Celery, signals

URL = os.environ["REDIS_URL"]
app = Celery("driver", broker=URL, backend=URL)


@app.task(name="echo")
def echo(arg: str) -> str:
    return arg


@signals.task_success.connect
def report(sender, result, **_) -> None:
    # In the worker, once the result is stored; the payload starts with its enqueue time.
    line = json.dumps({"event": "task", "enqueued_at": float(result), "done_at": time.time()})
    print(line, file=sys.__stdout__, flush=True)  # the worker redirects sys.stdout to its log


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int)
    parser.add_argument("--rate", type=float, help="tasks/s to enqueue (default: all at once)")
    parser.add_argument("--worker", action="store_true", help="be the worker (the child)")
    args = parser.parse_args()
    if args.worker:
        app.worker_main(["worker", "--pool=solo", "--loglevel=WARNING"])
        return
    worker = subprocess.Popen([sys.executable, __file__, "--worker"], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    start = time.monotonic()
    for i in range(args.tasks):
        if args.rate:
            time.sleep(max(0.0, start + i / args.rate - time.monotonic()))
        echo.delay(f"{time.time():<100.6f}")  # a 100-byte argument
    done = 0
    while done < args.tasks:
        line = worker.stdout.readline()
        if not line:
            sys.exit(f"the worker exited with {worker.wait()}")
        if line.startswith('{"event": "task"'):  # not the worker's banner
            print(line, end="", flush=True)
            done += 1
    worker.terminate()  # Celery's warm shutdown
    worker.wait()
    print(json.dumps({"event": "done", "tasks": args.tasks}), flush=True)


if __name__ == "__main__":
    main()
