"""The memory test's kernels on a real GPU, in one short run: every check needed, each on its own.

Run from the repository root with the system Python (no packages, no CUDA toolkit: the
standard library and the driver's libcuda.so.1, exactly what a rig has):

    python3 bench/gpu_memtest_check.py [--card 0] [--gib 16] [--stress-s 10]

Steps (a failing step prints its error and the run goes on to the next):
 1. the driver: CUDA's view of the card; the PTX loaded and compiled by the driver;
 2. agreement: the kernels' fills read back equal to the Python twin (word_value) for
    every mode, across a chunk boundary;
 3. kernel semantics: a clean verify; one planted word found with its address, expected
    and read values and its block; a 128-byte burst zeroed and reported as a zero
    burst; the march's ascending and descending read-verify-invert;
 4. every pattern over --gib GiB (16 by default): clean, each pattern's GiB/s;
 5. the self-test: a fault planted between fill and check in every pattern (and the
    stress mode for --stress-s seconds) must be found;
 6. the bench's figures: the test's GiB/s against cuMemcpyDtoD's over the same memory,
    and the ratio (target: at least 0.5);
 7. the real child process (``python3 -m hwcheck.memtest.child``) with its progress
    lines, as fleetd runs it.
Everything is printed; with $OUT set, a JSON summary goes to $OUT/memtest_gpu.json. Exit 0
when every step passed (or when there is no GPU: it says so), 1 otherwise. A watchdog
ends the run after --limit-s seconds (default 220), writing what it has.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_run import GpuRun  # noqa: E402

from hwcheck.memtest.children import SubprocessMemtester  # noqa: E402
from hwcheck.memtest.cuda import (  # noqa: E402
    CardMemory,
    CudaFailed,
    device_count,
    load_driver,
)
from hwcheck.memtest.patterns import (  # noqa: E402
    ADDRESS,
    CHECKER,
    CHECKER_ARG,
    MASK32,
    PATTERNS,
    RANDOM,
    SOLID,
    WALKING,
    Sweep,
)
from hwcheck.memtest.results import BLOCK_KIB, MemtestPlan, MemtestProgress  # noqa: E402
from hwcheck.memtest.runner import PLANT_FLIP, card_result  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
TARGET_RATIO = 0.5
RUN = GpuRun("memtest_gpu.json")
SUMMARY = RUN.summary
say = RUN.say
step = RUN.step
write_summary = RUN.write_summary


def counts_of(memory: CardMemory) -> dict[str, Any]:
    counts = memory.collect(8)
    return {
        "bad_words": counts.bad_words,
        "bit_errors": counts.bit_errors,
        "zero_bursts": counts.zero_bursts,
        "blocks": counts.blocks,
        "records": counts.records,
    }


def check_driver(lib: Any, card: int) -> dict[str, Any]:
    memory = CardMemory(lib, card, 64 * MIB, chunk_bytes=32 * MIB)
    try:
        name = memory.name()
        say(f"card {card}: {name}; PTX loaded and compiled in {memory.module_load_s * 1000:.0f} ms")
        return {"name": name, "module_load_ms": round(memory.module_load_s * 1000, 1)}
    finally:
        memory.close()


AGREEMENT_SWEEPS = [
    Sweep(True, SOLID, 0),
    Sweep(True, SOLID, 0, MASK32),
    Sweep(True, CHECKER, CHECKER_ARG),
    Sweep(True, CHECKER, CHECKER_ARG, MASK32),
    Sweep(True, WALKING, 5),
    Sweep(True, WALKING, 31, MASK32),
    Sweep(True, ADDRESS, 0),
    Sweep(True, ADDRESS, 0, MASK32),
    Sweep(True, RANDOM, 0x1234ABCD),
    Sweep(True, RANDOM, 0x1234ABCD, MASK32),
]


def check_agreement(lib: Any, card: int) -> dict[str, Any]:
    memory = CardMemory(lib, card, 64 * MIB, chunk_bytes=32 * MIB)
    try:
        chunk = memory.chunks[1].first
        offsets = [0, chunk - 2048, chunk, chunk + 12_345, memory.words - 2048]
        mismatches = []
        for sweep in AGREEMENT_SWEEPS:
            memory.sweep(sweep, 0, memory.words)
            memory.settle()
            for first in offsets:
                got = memory.read_words(first, 2048)
                for k, value in enumerate(got):
                    if value != sweep.expected(first + k):
                        mismatches.append(
                            f"mode {sweep.mode} arg {sweep.arg:#x} xor {sweep.xor:#x} word "
                            f"{first + k}: card {value:#010x}, python {sweep.expected(first + k):#010x}"
                        )
                        break
        for line in mismatches[:10]:
            say(f"MISMATCH {line}")
        say(
            f"{len(AGREEMENT_SWEEPS)} fills x {len(offsets)} places: {len(mismatches)} mismatch(es)"
        )
        return {"ok": not mismatches, "mismatches": mismatches[:10]}
    finally:
        memory.close()


def check_semantics(lib: Any, card: int) -> dict[str, Any]:
    memory = CardMemory(lib, card, 64 * MIB, chunk_bytes=32 * MIB)
    try:
        block = memory.block_words
        results: dict[str, Any] = {}
        problems: list[str] = []
        fill = Sweep(True, RANDOM, 99)
        check = Sweep(False, RANDOM, 99)

        memory.reset()
        memory.sweep(fill, 0, memory.words)
        memory.sweep(check, 0, memory.words)
        results["clean"] = counts_of(memory)
        if results["clean"]["bad_words"]:
            problems.append("a clean fill and verify found bad words")

        word = 3 * block + 777
        expected = fill.expected(word)
        memory.reset()
        memory.sweep(fill, 0, memory.words)
        memory.plant(word, expected ^ PLANT_FLIP)
        memory.sweep(check, 0, memory.words)
        planted = counts_of(memory)
        results["planted"] = planted
        want = [(word, expected, expected ^ PLANT_FLIP)]
        if (planted["bad_words"], planted["bit_errors"], planted["blocks"]) != (1, 2, {3: 1}):
            problems.append(f"planted word: counts {planted}")
        if planted["records"] != want:
            problems.append(f"planted word: records {planted['records']} != {want}")

        burst = 5 * block + 4096  # 128-byte aligned
        memory.reset()
        memory.sweep(fill, 0, memory.words)
        for k in range(32):
            memory.plant(burst + k, 0)
        memory.sweep(check, 0, memory.words)
        zeros = counts_of(memory)
        results["zero_burst"] = zeros
        if (
            zeros["zero_bursts"] != 1
            or zeros["bad_words"] < 31
            or zeros["blocks"] != {5: zeros["bad_words"]}
        ):
            problems.append(f"zeroed burst: {zeros}")

        background = Sweep(True, SOLID, 0)
        memory.reset()
        memory.sweep(background, 0, memory.words)
        memory.plant(word, PLANT_FLIP)
        memory.sweep(Sweep(False, SOLID, 0, 0, rewrite=True), 0, memory.words)
        up = counts_of(memory)
        memory.reset()
        memory.sweep(Sweep(False, SOLID, 0, MASK32, descending=True, rewrite=True), 0, memory.words)
        down = counts_of(memory)
        memory.reset()
        memory.sweep(Sweep(False, SOLID, 0, 0), 0, memory.words)
        last = counts_of(memory)
        results["march"] = {"ascending": up, "descending": down, "final": last}
        if (up["bad_words"], down["bad_words"], last["bad_words"]) != (1, 0, 0):
            problems.append(
                f"march: {up['bad_words']}, {down['bad_words']}, {last['bad_words']} bad"
            )
        for problem in problems:
            say(f"PROBLEM {problem}")
        say(
            f"clean verify: {results['clean']['bad_words']} bad; planted word: "
            f"{planted['bad_words']} bad word, {planted['bit_errors']} bits, records "
            f"{planted['records']}; zeroed burst: {zeros['zero_bursts']} zero burst(s), "
            f"{zeros['bad_words']} bad words; march: {up['bad_words']}/{down['bad_words']}/"
            f"{last['bad_words']} bad"
        )
        return {"ok": not problems, "problems": problems, **results}
    finally:
        memory.close()


def printer(started_s: float) -> Callable[[MemtestProgress], None]:
    def show(progress: MemtestProgress) -> None:
        if progress.steps and progress.step == progress.steps:
            say(f"  [{time.monotonic() - started_s:6.2f} s] {progress.line()}")

    return show


def run_summary(result: Any) -> list[dict[str, Any]]:
    rows = []
    for run in result.runs:
        rows.append(
            {
                "pattern": run.pattern,
                "bad_words": run.bad_words,
                "bit_errors": run.bit_errors,
                "zero_bursts": run.zero_bursts,
                "gib_per_s": run.gib_per_s,
                "duration_s": run.duration_s,
                "planted": run.planted,
                "planted_found": run.planted_found,
                "cycles": run.cycles,
            }
        )
        extra = f", {run.cycles} cycles" if run.cycles else ""
        say(
            f"  {run.pattern:<18} bad words {run.bad_words:>6}  {run.gib_per_s:>9,.1f} GiB/s  "
            f"{run.duration_s:>8.4f} s  planted {run.planted_found}/{run.planted}{extra}"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", type=int, default=0)
    parser.add_argument("--gib", type=float, default=16.0)
    parser.add_argument("--stress-s", type=float, default=10.0)
    parser.add_argument("--limit-s", type=int, default=220)
    args = parser.parse_args()
    SUMMARY.update(card=args.card, gib=args.gib)

    RUN.arm_watchdog(args.limit_s)
    started_s = time.monotonic()
    try:
        lib = load_driver()
        count = device_count(lib)
    except (OSError, AttributeError, CudaFailed) as exc:
        return RUN.no_gpu(str(exc))
    if count <= args.card:
        return RUN.no_gpu(f"CUDA sees {count} card(s), card {args.card} asked")
    SUMMARY["gpu"] = True
    say(f"CUDA sees {count} card(s); testing card {args.card} over {args.gib} GiB")
    oks = [
        step("1 driver and PTX load", lambda: check_driver(lib, args.card)),
        step("2 kernels agree with the Python twin", lambda: check_agreement(lib, args.card)),
        step("3 kernel semantics", lambda: check_semantics(lib, args.card)),
    ]
    figures: dict[str, float] = {}

    def big_runs() -> dict[str, Any]:
        memory = CardMemory(lib, args.card, int(args.gib * GIB))
        try:
            tested_gib = memory.words * 4 / GIB
            say(f"{tested_gib:.2f} GiB in {len(memory.chunks)} chunks")
            plan = MemtestPlan(patterns=PATTERNS, seed=0xC0FFEE)
            clean = card_result(
                args.card, memory, plan, printer(time.monotonic()), BLOCK_KIB, time.monotonic
            )
            say(
                f"every pattern: {clean.outcome.value}, {clean.gib_per_s:,.1f} GiB/s overall, {clean.duration_s} s"
            )
            rows = run_summary(clean)
            figures["test_gib_per_s"] = clean.gib_per_s
            figures["random_gib_per_s"] = next(
                r.gib_per_s for r in clean.runs if r.pattern == "random"
            )
            SUMMARY["every_pattern"] = {
                "outcome": clean.outcome.value,
                "tested_gib": round(tested_gib, 2),
                "gib_per_s": clean.gib_per_s,
                "duration_s": clean.duration_s,
                "runs": rows,
            }
            oks.append(clean.outcome.value == "passed")
            say(f"--- every pattern over {tested_gib:.2f} GiB: {'PASS' if oks[-1] else 'FAIL'}")

            plan = MemtestPlan(patterns=PATTERNS, stress_s=args.stress_s, inject=True, seed=7)
            planted = card_result(
                args.card, memory, plan, printer(time.monotonic()), BLOCK_KIB, time.monotonic
            )
            say(
                f"self-test: {planted.planted_found} of {planted.planted} planted faults found, "
                f"outcome {planted.outcome.value}, bad words left {planted.bad_words}"
            )
            rows = run_summary(planted)
            stress = planted.runs[-1]
            SUMMARY["planted"] = {
                "outcome": planted.outcome.value,
                "planted": planted.planted,
                "found": planted.planted_found,
                "bad_words": planted.bad_words,
                "stress_cycles": stress.cycles,
                "stress_cycles_per_s": round(stress.cycles / args.stress_s, 1)
                if args.stress_s
                else 0,
                "runs": rows,
            }
            oks.append(
                planted.outcome.value == "passed" and planted.planted == planted.planted_found > 0
            )
            say(f"--- planted faults found: {'PASS' if oks[-1] else 'FAIL'}")

            copy = memory.copy_gib_per_s()
            figures["copy_gib_per_s"] = round(copy, 1)
            ratio = figures["test_gib_per_s"] / copy if copy else 0.0
            figures["ratio"] = round(ratio, 3)
            figures["random_ratio"] = round(figures["random_gib_per_s"] / copy, 3) if copy else 0.0
            say(
                f"bench: test {figures['test_gib_per_s']:,.1f} GiB/s (random "
                f"{figures['random_gib_per_s']:,.1f}), cuMemcpyDtoD {copy:,.1f} GiB/s, ratio "
                f"{ratio:.3f} (target {TARGET_RATIO})"
            )
            SUMMARY["bench"] = dict(figures)
            return {"ok": ratio >= TARGET_RATIO, **figures}
        finally:
            memory.close()

    oks.append(step(f"4-6 every pattern over {args.gib} GiB, planted faults, bench", big_runs))

    def child() -> dict[str, Any]:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        seen: list[MemtestProgress] = []
        plan = MemtestPlan(
            mib=2048, patterns=("solid", "random"), stress_s=2.0, inject=True, seed=5
        )
        result = SubprocessMemtester(env=env).test(args.card, plan, seen.append)
        say(
            f"child: {result.summary()}; planted {result.planted_found}/{result.planted}; {len(seen)} progress lines"
        )
        if result.error:
            say(f"child error: {result.error}")
        ok = (
            result.outcome.value == "passed"
            and result.planted == result.planted_found > 0
            and bool(seen)
        )
        return {
            "ok": ok,
            "outcome": result.outcome.value,
            "progress_lines": len(seen),
            "error": result.error,
        }

    oks.append(step("7 the child process as fleetd runs it", child))
    SUMMARY["passed"] = all(oks)
    SUMMARY["total_s"] = round(time.monotonic() - started_s, 1)
    SUMMARY.pop("current", None)
    say(f"\n=== {'ALL PASSED' if all(oks) else 'SOME STEPS FAILED'} in {SUMMARY['total_s']} s ===")
    for key in ("test_gib_per_s", "copy_gib_per_s", "ratio"):
        if key in figures:
            say(f"  {key}: {figures[key]}")
    write_summary()
    return 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
