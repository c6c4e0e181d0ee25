"""Dramatiq: N no-op messages through RedisBroker and a Worker in this process.

A regtrack driver: the server's address comes in REDIS_URL. The default middleware plus
Results with its Redis backend, and the actor stores its results (as Dramatiq's docs set
results up; without them Dramatiq drops return values). The Worker keeps its default 8
threads. Prints a JSON line per processed message, then one for the end.
"""

import argparse
import json
import os
import threading
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend

broker = RedisBroker(url=os.environ["REDIS_URL"])
broker.add_middleware(Results(backend=RedisBackend(url=os.environ["REDIS_URL"])))
dramatiq.set_broker(broker)
done = threading.Semaphore(0)
printing = threading.Lock()  # the worker threads print whole lines, one at a time


@dramatiq.actor(store_results=True)
def echo(arg: str) -> str:
    return arg


class Report(Middleware):
    def after_process_message(self, broker, message, *, result=None, exception=None):
        # The payload starts with its enqueue time (see main).
        line = json.dumps({"event": "task", "enqueued_at": float(message.args[0]),
                           "done_at": time.time()})  # fmt: skip
        with printing:
            print(line, flush=True)
        done.release()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--rate", type=float, help="tasks/s to enqueue (default: all at once)")
    args = parser.parse_args()
    broker.add_middleware(Report())
    worker = dramatiq.Worker(broker)
    worker.start()
    start = time.monotonic()
    for i in range(args.tasks):
        if args.rate:
            time.sleep(max(0.0, start + i / args.rate - time.monotonic()))
        echo.send(f"{time.time():<100.6f}")  # a 100-byte argument
    for _ in range(args.tasks):
        done.acquire()
    worker.stop()
    broker.close()
    print(json.dumps({"event": "done", "tasks": args.tasks}), flush=True)


if __name__ == "__main__":
    main()
