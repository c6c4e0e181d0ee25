"""taskiq-redis: N no-op tasks through RedisStreamBroker with its Redis result backend (the
setup taskiq-redis's README shows), the receiver running in this process's event loop.

A regtrack driver: the server's address comes in REDIS_URL. Prints a JSON line per task whose
result is saved, then one for the end.
"""

import argparse
import asyncio
import json
import os
import time

from taskiq import TaskiqMiddleware
from taskiq.api import run_receiver_task
from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

URL = os.environ["REDIS_URL"]
broker = RedisStreamBroker(URL).with_result_backend(RedisAsyncResultBackend(URL))
finished: asyncio.Queue[None] = asyncio.Queue()


@broker.task
async def echo(arg: str) -> str:
    return arg


class Report(TaskiqMiddleware):
    def post_save(self, message, result) -> None:
        # The payload starts with its enqueue time (see main).
        print(json.dumps({"event": "task", "enqueued_at": float(message.args[0]),
                          "done_at": time.time()}), flush=True)  # fmt: skip
        finished.put_nowait(None)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--rate", type=float, help="tasks/s to enqueue (default: all at once)")
    args = parser.parse_args()
    broker.add_middlewares(Report())
    await broker.startup()
    receiver = asyncio.create_task(run_receiver_task(broker))
    start = time.monotonic()
    for i in range(args.tasks):
        if args.rate:
            await asyncio.sleep(max(0.0, start + i / args.rate - time.monotonic()))
        await echo.kiq(f"{time.time():<100.6f}")  # a 100-byte argument
    for _ in range(args.tasks):
        await finished.get()
    receiver.cancel()
    # taskiq 0.13's receiver ignores its cancellation now and then (about one run in four
    # here; every later cancel too) and reads on, one XREADGROUP per 2-s block, until the
    # program is killed: a stopped program would add those reads to its tasks' count.
    # Every task is done, so it is left behind.
    await asyncio.wait({receiver}, timeout=0.2)
    if receiver.done():
        await broker.shutdown()
    print(json.dumps({"event": "done", "tasks": args.tasks}), flush=True)
    if not receiver.done():
        os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
