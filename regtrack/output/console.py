"""Progress on stderr while a run goes: what runs now, what is left, an ETA.

On a terminal it is a live bar; in a CI log it is one line per trial, because a CI log
cannot redraw and people read it afterwards.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from regtrack.core import records
from regtrack.core.records import TrialRecord
from regtrack.core.text import printable


class ShownConsole(Console):
    """A console that shows text as it is: labels, commit subjects, stored reasons and
    error messages are a pull request's or a database's text, so never rich markup
    (``[link=...]``) or emoji codes, and a control character in a string it prints (an
    OSC title or link, a CSI sequence) is shown as its escape (core/text.py), not sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"markup": False, "emoji": False, "highlight": False, **kwargs})

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text, None, newlines=True), **kwargs)


err = ShownConsole(stderr=True, soft_wrap=True)


# Tables written to a pipe or a log (no terminal to fit) are not wrapped at all.
UNWRAPPED = 200


def table_width() -> int:
    """The width tables are drawn at: $COLUMNS when set, else the terminal's (rich's own
    reading of it), else UNWRAPPED for a pipe or a CI log, where wrapping only hurts."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stdout = Console(file=sys.stdout)
    return stdout.width if stdout.is_terminal else UNWRAPPED


def _trial_line(record: TrialRecord) -> str:
    if record.mode == "instructions":
        rate = (
            f"{record.instructions_per_op:,.1f} instructions/op under callgrind"
            if record.instructions_per_op
            else "no result"
        )
    elif record.mode in ("tasks", "task_latency") and record.ops_per_sec:
        lat = record.latency_ms
        tail = f", task p50 {lat['p50']:.3f} ms, p99 {lat['p99']:.3f} ms" if "p99" in lat else ""
        rate = f"{record.ops_per_sec:,.0f} tasks/s{tail}"
    elif record.mode == "latency" and record.latency_ms.get("p99") is not None:
        lat = record.latency_ms
        rate = (
            f"p50 {lat.get('p50', 0):.3f} ms, p99 {lat['p99']:.3f} ms at "
            f"{record.ops_per_sec or 0:,.0f} ops/s"
        )
    else:
        rate = f"{record.ops_per_sec:,.0f} ops/s" if record.ops_per_sec else "no result"
    status = "ok" if record.valid else f"INVALID: {printable(record.reason_text, None)}"
    return (
        f"rep {record.repetition + 1} {printable(record.target_label)} "
        f"{printable(record.point)}: {rate} "
        f"(client cpu {record.client_cpu_pct or 0:.0f}%, server cpu "
        f"{record.server_cpu_pct or 0:.0f}%) {status}"
    )


@contextmanager
def run_progress() -> Iterator[records.Progress]:
    if err.is_terminal:
        bar = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err,
            transient=False,
        )
        task = bar.add_task("preparing", total=None)

        def trial_done(record: TrialRecord) -> None:
            bar.advance(task)
            if not record.valid:
                bar.console.print(_trial_line(record), style="yellow")

        hooks = records.Progress(
            started=lambda total: bar.update(task, total=total),
            phase=lambda text: bar.update(task, description=printable(text)),
            trial_done=trial_done,
            note=lambda text: bar.console.print(f"regtrack: {text}", style="yellow"),
        )
        with bar:
            yield hooks
        return

    state = {"total": 0, "done": 0, "t0": time.monotonic()}

    def started(total: int) -> None:
        if not state["done"]:
            state["t0"] = time.monotonic()
        state["total"] = total
        print(f"regtrack: {total} trials to run", file=sys.stderr, flush=True)

    def line(record: TrialRecord) -> None:
        state["done"] += 1
        done, total = state["done"], state["total"]
        elapsed = time.monotonic() - state["t0"]
        eta = elapsed / done * (total - done) if done else 0.0
        print(
            f"[{done}/{total}, ETA {eta:.0f}s] {_trial_line(record)}",
            file=sys.stderr,
            flush=True,
        )

    def note(text: str) -> None:
        print(f"regtrack: {printable(text, None, newlines=True)}", file=sys.stderr, flush=True)

    yield records.Progress(started=started, trial_done=line, note=note)


@contextmanager
def build_progress() -> Iterator[Callable[[str], None]]:
    """A phase callback for builds: a spinner on a terminal, a line every 15 s in a log."""
    if err.is_terminal:
        with err.status("preparing versions") as status:
            yield lambda text: status.update(Text(printable(text)))
        return
    last = {"text": "", "at": 0.0}

    def show(text: str) -> None:
        subject = text.split(":")[0]
        now = time.monotonic()
        if subject != last["text"].split(":")[0] or now - last["at"] >= 15:
            print(f"regtrack: {printable(text, None)}", file=sys.stderr, flush=True)
            last.update(text=text, at=now)

    yield show
