"""The memory test's speed on each card against the card's own device-to-device copy.

For each card: the memory test (hwcheck/memtest/memtest.ptx through libcuda, as fleetd's child
runs it) over --gib GiB, its GiB/s per pattern and overall (bytes written and read on
the card per second), then ``cuMemcpyDtoD`` of the same size in the same run, and the
ratio. Target: the test moves at least half of what the card's own copy moves (>= 0.5).
Only the standard library and the driver's libcuda.so.1 (no toolkit, no torch); on a
machine without a GPU it says so and exits 0.

    python3 bench/memtest_bandwidth.py [--card N] [--gib 8] [--patterns LIST] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hwcheck.memtest.cuda import CardMemory, CudaFailed, device_count, load_driver
from hwcheck.memtest.patterns import UnknownPattern, parse_patterns
from hwcheck.memtest.results import BLOCK_KIB, MemtestPlan
from hwcheck.memtest.runner import card_result

TARGET_RATIO = 0.5


def bench_card(lib: Any, card: int, gib: float, patterns: tuple[str, ...]) -> dict[str, Any]:
    """One card's figures: each pattern's GiB/s, the overall, the copy's and the ratio."""
    memory = CardMemory(lib, card, int(gib * (1 << 30)))
    try:
        plan = MemtestPlan(patterns=patterns, seed=int(time.time()) & 0xFFFFFFFF)
        result = card_result(card, memory, plan, lambda _p: None, BLOCK_KIB, time.monotonic)
        copy = memory.copy_gib_per_s()
        return {
            "card": card,
            "name": memory.name(),
            "tested_gib": round(memory.words * 4 / (1 << 30), 2),
            "module_load_s": round(memory.module_load_s, 3),
            "outcome": result.outcome.value,
            "bad_words": result.bad_words,
            "patterns": {run.pattern: run.gib_per_s for run in result.runs},
            "test_gib_per_s": result.gib_per_s,
            "copy_gib_per_s": round(copy, 1),
            "ratio": round(result.gib_per_s / copy, 3) if copy else None,
        }
    finally:
        memory.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", type=int, help="only this card (CUDA ordinal)")
    parser.add_argument("--gib", type=float, default=8.0, help="GiB per card (default 8)")
    parser.add_argument("--patterns", help="comma-separated (default: every pattern)")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(argv)
    try:
        patterns = parse_patterns(args.patterns)
    except UnknownPattern as exc:
        parser.error(str(exc))
    if not args.gib > 0:
        parser.error("--gib must be positive")
    try:
        lib = load_driver()
        count = device_count(lib)
    except (OSError, AttributeError, CudaFailed) as exc:
        print(f"memtest_bandwidth: no GPU here ({exc}); nothing to measure")
        return 0
    if count == 0:
        print("memtest_bandwidth: no GPU here (CUDA sees no card); nothing to measure")
        return 0
    cards = [args.card] if args.card is not None else list(range(count))
    rows = []
    for card in cards:
        try:
            rows.append(bench_card(lib, card, args.gib, patterns))
        except CudaFailed as exc:
            rows.append({"card": card, "error": exc.name})
    if args.json:
        print(json.dumps({"target_ratio": TARGET_RATIO, "cards": rows}, indent=2))
        return 0
    for row in rows:
        if "error" in row:
            print(f"card {row['card']}: {row['error']}")
            continue
        verdict = "meets" if (row["ratio"] or 0) >= TARGET_RATIO else "BELOW"
        print(
            f"card {row['card']} ({row['name']}), {row['tested_gib']} GiB: test "
            f"{row['test_gib_per_s']:,.0f} GiB/s, cuMemcpyDtoD {row['copy_gib_per_s']:,.0f} "
            f"GiB/s, ratio {row['ratio']} ({verdict} the {TARGET_RATIO} target); "
            f"{row['outcome']}, PTX load {row['module_load_s']} s"
        )
        for name, rate in row["patterns"].items():
            print(f"    {name:<18} {rate:>9,.0f} GiB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
