#!/usr/bin/env python3
"""May instruction counts of two hosts be pooled? What moves them besides the code.

Four measurements on this machine, one after another (real servers under callgrind,
seed-matched repetitions, 100k GETs at pipeline 10; about 10 minutes):

1. What glibc sees under valgrind: a probe prints the CPU vendor, model and ISA features
   natively and under valgrind, which emulates CPUID and presents a fixed CPU of the
   host's capability level, not the host's own.
2. Two regtrack processes, the same plan: do two runs that differ only in the process
   (and the time) count the same instructions per op, repetition by repetition?
3. The same binary with glibc told the CPU lacks AVX2 (GLIBC_TUNABLES=glibc.cpu.hwcaps=
   -AVX2): the effect of the string-function variants glibc picks by CPU.
4. The same release (7.0.15), two builds: Debian's package and regtrack's own build from
   the release's source (different flags and allocator), seed-matched in one run.

Prints every figure; asserts nothing.

    .venv/bin/python benchmarks/instruction_hosts.py --source-repo ~/.cache/regtrack/offline-redis
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")
PLAN = ["--metric", "instructions", "--pipelines", "10", "--keys", "1000", "--no-report"]
PROBE = r"""
#include <cpuid.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    unsigned a, b, c, d; char vendor[13] = {0}, brand[49] = {0};
    __get_cpuid(0, &a, &b, &c, &d);
    memcpy(vendor, &b, 4); memcpy(vendor + 4, &d, 4); memcpy(vendor + 8, &c, 4);
    for (unsigned i = 0; i < 3; i++) {
        __get_cpuid(0x80000002 + i, &a, &b, &c, &d);
        memcpy(brand + 16 * i, &a, 4); memcpy(brand + 16 * i + 4, &b, 4);
        memcpy(brand + 16 * i + 8, &c, 4); memcpy(brand + 16 * i + 12, &d, 4);
    }
    __get_cpuid(1, &a, &b, &c, &d);
    unsigned family = ((a >> 8) & 15) + ((a >> 20) & 255);
    unsigned model = ((a >> 4) & 15) | ((a >> 12) & 240);
    int sse42 = (c >> 20) & 1, avx = (c >> 28) & 1;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    printf("%s family %u model %u \"%s\": sse4_2=%d avx=%d avx2=%d bmi2=%d erms=%d"
           " avx512f=%d fsrm=%d\n",
           vendor, family, model, brand, sse42, avx, (b >> 5) & 1, (b >> 8) & 1, (b >> 9) & 1,
           (b >> 16) & 1, (d >> 4) & 1);
    return 0;
}
"""


def probe() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text(PROBE)
        subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True)
        native = subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip()
        under = subprocess.run(
            ["valgrind", "-q", "--tool=none", str(exe)], capture_output=True, text=True
        ).stdout.strip()
    print(f"1. CPUID natively:       {native}")
    print(f"   CPUID under valgrind: {under}")


def run(db: Path, versions: str, repetitions: int, env: dict[str, str] | None = None,
        extra: list[str] | None = None) -> None:  # fmt: skip
    argv = [REGTRACK, "run", "--versions", versions, *PLAN, "--repetitions", str(repetitions),
            "--instruction-requests", "100000", "--db", str(db), *(extra or [])]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        sys.exit(f"regtrack run failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")


def counts(db: Path) -> dict[tuple[str, int], float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT g.label, t.repetition, t.instructions_per_op FROM trials t"
            " JOIN targets g ON g.id = t.target_id WHERE t.valid = 1 AND t.mode = 'instructions'"
        ).fetchall()
    return {(label, rep): value for label, rep, value in rows}


def functions(db: Path, pattern: str) -> dict[str, float]:
    """Exclusive instructions per op of functions matching ``pattern`` (LIKE), mean over
    the trials of the run."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT f.function, AVG(1.0 * f.exclusive / t.server_calls) FROM function_costs f"
            " JOIN trials t ON t.id = f.trial_id WHERE f.function LIKE ? AND t.valid = 1"
            " GROUP BY f.function ORDER BY 2 DESC LIMIT 6",
            (pattern,),
        ).fetchall()
    return {name: per_op for name, per_op in rows}


def pct(a: float, b: float) -> str:
    return f"{100.0 * (b / a - 1.0):+.3f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default="/usr/bin/redis-server", help="Debian's 7.0.15")
    parser.add_argument("--source-repo", required=True, help="holds tag 7.0.15")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    probe()
    reps = args.repetitions
    with tempfile.TemporaryDirectory() as tmp:
        # Every run reads the same seeds (offset 0), so repetition r of one run pairs with
        # repetition r of another (each run would draw its own offset otherwise).
        (Path(tmp) / "regtrack.toml").write_text("[run]\nseed_offset = 0\n")
        os.environ["REGTRACK_CONFIG_DIR"] = tmp
        first, second, masked, builds = (Path(tmp) / f"{n}.db" for n in range(4))
        version = f"deb=bin:{args.binary}"
        run(first, version, reps)
        run(second, version, reps)
        one, two = counts(first), counts(second)
        print(f"2. two regtrack processes, {version}, {reps} seed-matched repetitions:")
        for key in sorted(one):
            print(f"   repetition {key[1]}: {one[key]:.3f} vs {two.get(key, float('nan')):.3f} "
                  f"instructions/op ({pct(one[key], two[key])})")  # fmt: skip
        tunables = "glibc.cpu.hwcaps=-AVX2"
        run(masked, version, reps, env={"GLIBC_TUNABLES": tunables})
        three = counts(masked)
        print(f"3. the same binary with GLIBC_TUNABLES={tunables}:")
        for key in sorted(one):
            print(f"   repetition {key[1]}: {one[key]:.3f} -> {three[key]:.3f} "
                  f"({pct(one[key], three[key])})")  # fmt: skip
        for name, db in (("as found", first), ("without AVX2", masked)):
            top = functions(db, "%str%cmp%") | functions(db, "%mem%")
            shown = ", ".join(f"{f} {v:.1f}" for f, v in sorted(top.items(), key=lambda x: -x[1]))
            print(f"   {name}: string functions (exclusive Ir/op): {shown}")
        run(builds, f"{version},src=7.0.15", reps, extra=["--source-repo", args.source_repo])
        four = counts(builds)
        print("4. the same release, two builds (seed-matched in one run):")
        for rep in range(reps):
            a, b = four.get(("deb", rep)), four.get(("src", rep))
            if a and b:
                print(f"   repetition {rep}: Debian package {a:.3f}, regtrack's build {b:.3f} "
                      f"({pct(a, b)})")  # fmt: skip
        with sqlite3.connect(builds) as conn:
            for label, sha, details in conn.execute(
                "SELECT label, binary_sha256, details FROM targets"
            ):
                flags = (json.loads(details or "{}") or {}).get("build_flags")
                print(f"   {label}: sha256 {str(sha)[:12]}, build flags {flags}")


if __name__ == "__main__":
    main()
