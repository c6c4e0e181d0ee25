"""A known regression, made on purpose: Redis with extra work in every GET.

Clones a source repository and commits, on top of a given ref, extra work at the start
of getGenericCommand: a busy loop of ``spins`` iterations (about 6 instructions each),
a memory stall (random cache lines of a large buffer, few instructions), or a timed
delay (a spin on the time-stamp counter: time, not instructions). It is how the
tests and benchmarks check that regtrack finds a regression of a known size, and stays
quiet about an A/A comparison.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "regtrack",
    "GIT_AUTHOR_EMAIL": "regtrack@example.invalid",
    "GIT_COMMITTER_NAME": "regtrack",
    "GIT_COMMITTER_EMAIL": "regtrack@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def make_slow_branch(source: Path, dest: Path, base: str, spins: int) -> str:
    """A clone of ``source`` with branch ``slow-<spins>`` = ``base`` + the busy loop.

    Deterministic (fixed dates and authors), so the build cache reuses it across runs.
    Returns the branch name.
    """
    loop = (
        f"    for (volatile unsigned regtrack_spin = 0; regtrack_spin < {spins}; "
        "regtrack_spin++);\n"
    )
    return _patched_branch(
        source, dest, base, f"slow-{spins}", "", loop,
        f"GET: {spins} wasted loop iterations (regtrack test)",
    )  # fmt: skip


def make_stall_branch(
    source: Path,
    dest: Path,
    base: str,
    lines: int,
    mib: int = 256,
    chained: bool = False,
    every: int = 1,
) -> str:
    """A clone of ``source`` with branch ``stall-<lines>x<mib>`` = ``base`` + a memory
    stall: every GET increments ``lines`` pseudo-random bytes, each on its own cache line,
    of a ``mib`` MiB buffer (xorshift; the buffer and state are static). The instructions
    per GET rise by about a dozen a line (two chained lines: +0.8 to +1.0% of a GET,
    docs/methodology.md); the cache and TLB misses cost throughput, which only a
    throughput measurement can see. Independent misses overlap
    in the core (four lines cost less than twice one); ``chained`` (branch
    ``stall-chain-<lines>x<mib>``) feeds each byte read into the next address, so the
    misses queue one behind the other. ``every`` N > 1 (branch suffix ``-every<N>``)
    stalls only every Nth GET: a fraction of the cost, where one line costs too much.
    """
    size = mib << 20
    globals_ = (
        f"static unsigned char regtrack_stall[{size}UL];\n"
        "static unsigned long regtrack_x = 88172645463325252UL;\n"
    )
    touch = (
        f"    regtrack_x += regtrack_stall[(regtrack_x % {size}UL) & ~63UL]++;\n"
        if chained
        else f"    regtrack_stall[(regtrack_x % {size}UL) & ~63UL]++;\n"
    )
    body = "".join(
        "    regtrack_x ^= regtrack_x << 13; regtrack_x ^= regtrack_x >> 7; "
        "regtrack_x ^= regtrack_x << 17;\n" + touch
        for _ in range(lines)
    )
    name = f"stall-chain-{lines}x{mib}" if chained else f"stall-{lines}x{mib}"
    if every > 1:
        globals_ += "static unsigned long regtrack_n;\n"
        body = f"  if (++regtrack_n % {every}UL == 0) {{\n{body}  }}\n"
        name += f"-every{every}"
    how = "chained " if chained else ""
    return _patched_branch(
        source, dest, base, name, globals_, body,
        f"GET: {lines} {how}random cache line(s) of a {mib} MiB buffer (regtrack test)",
    )  # fmt: skip


def make_branchy_branch(source: Path, dest: Path, base: str, branches: int) -> str:
    """A clone of ``source`` with branch ``branchy-<branches>`` = ``base`` + unpredictable
    branches: every GET draws a pseudo-random word (xorshift) and tests ``branches`` of
    its bits (at most 64), each test its own conditional branch around a volatile
    increment (a volatile access cannot become a conditional move). Each is taken half the
    time at random, so about half of them are mispredicted, by a core and by callgrind's
    branch simulation alike: a known count of mispredictions for few instructions (about
    four a branch), which is how benchmarks/cycle_weights.py measures what one costs."""
    if not 1 <= branches <= 64:
        raise ValueError("branches: 1 to 64 (the bits of one word)")
    globals_ = (
        "static unsigned long regtrack_b = 88172645463325252UL;\n"
        "static volatile unsigned long regtrack_taken;\n"
    )
    body = (
        "    regtrack_b ^= regtrack_b << 13; regtrack_b ^= regtrack_b >> 7; "
        "regtrack_b ^= regtrack_b << 17;\n"
        + "".join(
            f"    if (regtrack_b & (1UL << {bit})) regtrack_taken++;\n" for bit in range(branches)
        )
    )
    return _patched_branch(
        source, dest, base, f"branchy-{branches}", globals_, body,
        f"GET: {branches} unpredictable branches (regtrack test)",
    )  # fmt: skip


def make_delay_branch(source: Path, dest: Path, base: str, cycles: int) -> str:
    """A clone of ``source`` with branch ``delay-<cycles>`` = ``base`` + a timed delay:
    every GET spins on the time-stamp counter until ``cycles`` ticks have passed (x86-64).

    Like a memory stall it costs time, not instructions: under callgrind a GET spins a few
    rounds at most (each round of the simulated CPU takes longer than the delay), so its
    instructions per GET barely move, while natively the delay's cost is set by its
    length alone, not by the host's caches. Where every memory stall costs more than a
    few percent (docs/methodology.md), a delay is sized to cost about 3%.
    """
    before = "#include <x86intrin.h>\n"
    body = (
        f"    {{ unsigned long long regtrack_end = __rdtsc() + {cycles}ULL;\n"
        "      while (__rdtsc() < regtrack_end) ; }\n"
    )
    return _patched_branch(
        source, dest, base, f"delay-{cycles}", before, body,
        f"GET: a delay of {cycles} time-stamp counter ticks (regtrack test)",
    )  # fmt: skip


def make_pause_branch(source: Path, dest: Path, base: str, pause_us: int) -> str:
    """A clone of ``source`` with branch ``pause-<us>`` = ``base`` + an event loop that
    stalls: serverCron, the timer event that runs hz (10) times a second, busy-waits
    ``pause_us`` microseconds on the clock each time (think of a fork, a defrag or an
    expire cycle). Throughput loses about pause x hz (2 ms: 2%) and a GET executes no
    extra instruction, while every request that arrives during a pause waits for it: at
    half load, p99 moves from tens of microseconds to about the pause."""
    body = (
        f"    {{ long long regtrack_end = ustime() + {pause_us};\n"
        "      while (ustime() < regtrack_end) ; }\n"
    )
    return _patched_branch(
        source, dest, base, f"pause-{pause_us}", "", body,
        f"serverCron: busy-wait {pause_us} us each run (regtrack test)",
        file="server.c",
        function=r"int serverCron\(struct aeEventLoop \*eventLoop, long long id, "
        r"void \*clientData\) \{\n",
    )  # fmt: skip


def make_pop_branch(source: Path, dest: Path, base: str, spins: int) -> str:
    """A clone of ``source`` with branch ``pop-<spins>`` = ``base`` + the busy loop at the
    start of brpopCommand: a consumer's BRPOP that finds a task costs more (a list queue's
    consumer command made slower, as a Celery or Sidekiq worker sends it)."""
    loop = (
        f"    for (volatile unsigned regtrack_spin = 0; regtrack_spin < {spins}; "
        "regtrack_spin++);\n"
    )
    return _patched_branch(
        source, dest, base, f"pop-{spins}", "", loop,
        f"BRPOP: {spins} wasted loop iterations (regtrack test)",
        file="t_list.c", function=r"void brpopCommand\(client \*c\) \{\n",
    )  # fmt: skip


def make_syscall_branch(source: Path, dest: Path, base: str, calls: int = 1) -> str:
    """A clone of ``source`` with branch ``syscall-<calls>`` = ``base`` + ``calls`` cheap
    system calls at the start of getCommand: ``syscall(SYS_getppid)`` (the raw call, so no
    libc cache can answer it). Kernel work only: a few instructions per GET in user space,
    no read or write, so /proc/PID/io and callgrind barely see it; syscalls per op by name
    (bench/kernel_calls.py) must, and name getppid."""
    before = "#include <unistd.h>\n#include <sys/syscall.h>\n"
    body = "".join("    syscall(SYS_getppid);\n" for _ in range(calls))
    return _patched_branch(
        source, dest, base, f"syscall-{calls}", before, body,
        f"GET: {calls} getppid system call(s) (regtrack test)",
        function=r"void getCommand\(client \*c\) \{\n",
    )  # fmt: skip


def _patched_branch(
    source: Path, dest: Path, base: str, branch: str, before: str, body: str, subject: str,
    file: str = "t_string.c", function: str = r"int getGenericCommand\(client \*c\) \{\n",
) -> str:  # fmt: skip
    """``branch`` = ``base`` + ``before`` ahead of ``function`` (a regex of its first line,
    in src/``file``; getGenericCommand by default) and ``body`` at its start; made once
    per clone (deterministic, so builds are cached by its commit)."""
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True)
    if branch in _git(dest, "branch", "--list", branch):
        return branch
    _git(dest, "checkout", "--quiet", "-b", branch, base)
    path = dest / "src" / file
    text = path.read_text()
    patched, count = re.subn("^" + function, lambda m: before + m.group(0) + body, text, flags=re.M)
    if count != 1:
        raise RuntimeError(f"{function} not found once in {path}")
    path.write_text(patched)
    _git(dest, "commit", "--quiet", "-am", subject)
    _git(dest, "checkout", "--quiet", "--detach")
    return branch
