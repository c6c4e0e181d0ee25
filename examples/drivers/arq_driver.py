"""arq: N no-op jobs through enqueue_job and a Worker in this process's event loop.

A regtrack driver: the server's address comes in REDIS_URL. The worker runs as arq's
long-running worker does (polling every 0.5 s, not burst mode) and is stopped after N jobs;
results are kept (arq's default, 1 h). Prints a JSON line per job once its result is
recorded, then one for the end.
"""

import argparse
import asyncio
import json
import os
import time

from arq import Worker, create_pool
from arq.connections import RedisSettings

finished: asyncio.Queue[None] = asyncio.Queue()


async def echo(ctx, arg: str) -> str:
    return arg


async def report(ctx) -> None:
    # enqueue_time: arq's own record of the enqueue (ms)
    print(json.dumps({"event": "task", "enqueued_at": ctx["enqueue_time"].timestamp(),
                      "done_at": time.time()}), flush=True)  # fmt: skip
    finished.put_nowait(None)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--rate", type=float, help="tasks/s to enqueue (default: all at once)")
    args = parser.parse_args()
    settings = RedisSettings.from_dsn(os.environ["REDIS_URL"])
    pool = await create_pool(settings)
    worker = Worker(functions=[echo], redis_settings=settings, after_job_end=report,
                    handle_signals=False)  # fmt: skip
    running = asyncio.create_task(worker.async_run())
    start = time.monotonic()
    for i in range(args.tasks):
        if args.rate:
            await asyncio.sleep(max(0.0, start + i / args.rate - time.monotonic()))
        await pool.enqueue_job("echo", f"{time.time():<100.6f}")  # a 100-byte argument
    for _ in range(args.tasks):
        await finished.get()
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await worker.close()
    await pool.aclose()
    print(json.dumps({"event": "done", "tasks": args.tasks}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
