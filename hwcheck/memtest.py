"""The memory test: a pattern write/read over each card's memory, in a child per card.

The cards have no ECC: a bad HBM cell flips bits silently, and an engine on it crashes
with an illegal memory access that looks like a software bug ("a memory test? none had
been run", the seeds). :mod:`hwcheck.memtest_child` does the test through libcuda's
driver API; this module runs it per card under a hard time limit that grows with the
size tested (a child stuck in the driver is abandoned, never killed: see
``hwcheck.child_run``), and stops after a card that hung, since the driver then holds
that card and the next test would likely hang too. Never beside a running engine: that
is the caller's to refuse (fleetd does, with exit 4 in fleetctl).
"""

from __future__ import annotations

import os
import sys

from hwcheck.child_run import json_records, run_child
from hwcheck.memtest_results import CardMemtest, MemtestOutcome

BASE_TIMEOUT_S = 60.0  # context, allocation and teardown
TIMEOUT_PER_GIB_S = 30.0  # three patterns written and read back over Gen2 x4, with margin


def timeout_s(mib: int, base_s: float = BASE_TIMEOUT_S) -> float:
    """The time limit for testing ``mib`` MiB of one card."""
    return base_s + TIMEOUT_PER_GIB_S * mib / 1024


def parse_child_output(text: str, card: int, timed_out: bool) -> CardMemtest:
    """The child's JSON line as a result; no line is a timeout or a failure to run."""
    for record in json_records(text):
        if "unavailable" in record:
            return CardMemtest(card, MemtestOutcome.UNAVAILABLE, error=str(record["unavailable"]))
        if record.get("card") == card:
            try:
                return CardMemtest.from_dict(record)
            except (KeyError, TypeError, ValueError):
                break
    if timed_out:
        return CardMemtest(card, MemtestOutcome.TIMED_OUT, error="the card did not answer in time")
    return CardMemtest(card, MemtestOutcome.ERROR, error="the test ended without a result")


class SubprocessMemtester:
    """The real test: one child Python process per card, driving libcuda through ctypes."""

    def __init__(
        self, env: dict[str, str] | None = None, base_timeout_s: float = BASE_TIMEOUT_S
    ) -> None:
        self._env = env
        self._base_timeout_s = base_timeout_s

    def test(self, card: int, mib: int) -> CardMemtest:
        """Test ``mib`` MiB of card ``card`` (NVML index) and return its result."""
        env = dict(os.environ if self._env is None else self._env)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        argv = [sys.executable, "-m", "hwcheck.memtest_child", str(card), str(mib)]
        limit_s = timeout_s(mib, self._base_timeout_s)
        done = run_child(argv, env, limit_s, f"memory test of card {card}")
        return parse_child_output(done.stdout, card, done.timed_out)
