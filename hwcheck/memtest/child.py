"""The memory test's child process: one card, tested on the card by the PTX kernels.

Run as ``python -m hwcheck.memtest.child ORDINAL PLAN_JSON`` by :mod:`hwcheck.memtest.children`,
never imported by the daemon's own process for the test: a card with bad HBM can hang the
driver, and only a separate process can be abandoned. These cards have no ECC, so
nothing else ever says a bit flipped.

It prints JSON lines: ``{"progress": {...}}`` as the test goes (at most twice a second,
and at each pattern's end), then the result (``CardMemtest.as_dict()`` form), or
``{"unavailable": why}`` when there is no driver library. ``CUDA_DEVICE_ORDER`` is set to
``PCI_BUS_ID`` by the parent so CUDA's ordinal is NVML's index.

Why the old read-back test (``cuMemsetD32`` then ``cuMemcpyDtoH`` of every block,
compared in Python) is gone: over the CMP 170HX's Gen1/Gen2 x4 link it took minutes per
pattern per card, and it could not load the HBM the way an engine does, so a card that
corrupts data only under full-bandwidth traffic passed it. The kernels need nothing the
read-back did not (the driver compiles PTX since R450); a driver that cannot load them
reports its error and the card is ``error``, never a false pass.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from functools import partial

from hwcheck.memtest.cuda import MIB, CardMemory, CudaFailed, load_driver
from hwcheck.memtest.results import (
    BLOCK_KIB,
    CardMemtest,
    MemtestOutcome,
    MemtestPlan,
    MemtestProgress,
)
from hwcheck.memtest.runner import card_result
from hwcheck.thermal_stop import stop_file_reason

PROGRESS_EVERY_S = 0.5


class ProgressPrinter:
    """Prints progress lines, at most every :data:`PROGRESS_EVERY_S` (and each pattern's end)."""

    def __init__(self) -> None:
        self._last_s = float("-inf")

    def __call__(self, progress: MemtestProgress) -> None:
        """Print ``progress`` when due."""
        now_s = time.monotonic()
        done = bool(progress.steps) and progress.step == progress.steps
        if now_s - self._last_s < PROGRESS_EVERY_S and not done:
            return
        self._last_s = now_s
        document = progress.as_dict()
        del document["card"]
        print(json.dumps({"progress": document}), flush=True)


def run_card(
    lib: ctypes.CDLL, ordinal: int, plan: MemtestPlan, progress: ProgressPrinter
) -> CardMemtest:
    """Test card ``ordinal`` under ``plan``; CUDA failures are the result's ``error``."""
    started_s = time.monotonic()
    want = None if plan.mib is None else plan.mib * MIB
    try:
        memory = CardMemory(lib, ordinal, want)
    except CudaFailed as exc:
        return CardMemtest(
            ordinal, MemtestOutcome.ERROR, error=exc.name, duration_s=_since(started_s)
        )
    try:
        stop = partial(stop_file_reason, plan.stop_file)  # the parent writes it: too hot
        return card_result(ordinal, memory, plan, progress, BLOCK_KIB, time.monotonic, stop)
    except CudaFailed as exc:
        return CardMemtest(
            ordinal,
            MemtestOutcome.ERROR,
            tested_mib=memory.words * 4 // MIB,
            error=exc.name,
            duration_s=_since(started_s),
        )
    finally:
        memory.close()


def _since(started_s: float) -> float:
    return round(time.monotonic() - started_s, 3)


def main(argv: list[str]) -> int:
    """Test the card named in ``argv`` (``ORDINAL PLAN_JSON``) and print the JSON lines."""
    ordinal, plan = int(argv[0]), MemtestPlan.from_dict(json.loads(argv[1]))
    try:
        lib = load_driver()
    except (OSError, AttributeError) as exc:
        print(json.dumps({"unavailable": f"no CUDA driver library: {exc}"}), flush=True)
        return 0
    result = run_card(lib, ordinal, plan, ProgressPrinter())
    print(json.dumps(result.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
