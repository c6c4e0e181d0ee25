"""RQ: N no-op jobs through one queue and a SimpleWorker in this process.

A regtrack driver: the server's address comes in REDIS_URL. The producer (a thread) enqueues
with Queue.enqueue on a connection of its own, as a web process would; the worker runs as
RQ's long-running worker does (blocking dequeue, not burst mode) and stops after N jobs.
Prints a JSON line per finished job, then one for the end.
"""

import argparse
import json
import os
import threading
import time

from redis import Redis
from rq import Queue, SimpleWorker


def echo(arg: str) -> str:
    return arg


# Set once the worker has registered: the producer starts then, so that no backlog of the
# worker's start-up is drained faster than tasks arrive (enqueues and completions at one rate).
READY = threading.Event()


class Worker(SimpleWorker):
    def register_birth(self):
        super().register_birth()
        READY.set()

    def execute_job(self, job, queue):
        super().execute_job(job, queue)
        # The payload starts with its enqueue time (see produce).
        print(json.dumps({"event": "task", "enqueued_at": float(job.args[0]),
                          "done_at": time.time()}), flush=True)  # fmt: skip


def produce(queue: Queue, tasks: int, rate: float | None) -> None:
    READY.wait(60)
    start = time.monotonic()
    for i in range(tasks):
        if rate:
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
        # By name: the worker imports it (RQ runs no function of __main__)
        queue.enqueue("rq_driver.echo", f"{time.time():<100.6f}")  # a 100-byte argument


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--rate", type=float, help="tasks/s to enqueue (default: all at once)")
    args = parser.parse_args()
    # Two clients, two pools: one shared pool hands the worker's commands to whichever
    # connection the producer thread is not using, so one job's commands were spread over
    # two connections (a capture could not tell the worker's round trips apart).
    url = os.environ["REDIS_URL"]
    queue = Queue("default", connection=Redis.from_url(url))
    producer = threading.Thread(target=produce, args=(queue, args.tasks, args.rate))
    producer.start()
    connection = Redis.from_url(url)
    worker_queue = Queue("default", connection=connection)
    Worker([worker_queue], connection=connection).work(max_jobs=args.tasks, logging_level="WARNING")
    producer.join()
    print(json.dumps({"event": "done", "tasks": args.tasks}), flush=True)


if __name__ == "__main__":
    main()
