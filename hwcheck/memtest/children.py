"""The memory test: the kernels of ``hwcheck/memtest/memtest.ptx`` run on each card, in a child per card.

The cards have no ECC: a bad HBM cell flips bits silently, and an engine on it crashes
with an illegal memory access that looks like a software bug ("a memory test? none had
been run", the seeds). :mod:`hwcheck.memtest.child` writes and checks the patterns on the
card (only counts, the first bad words and a block map cross the PCIe link); this module
runs one child per card, all at once (:func:`hwcheck.memtest.results.run_on_cards`), and
relays each child's progress lines. A child that stops printing for :data:`SILENCE_S` is
stuck in the driver: it is abandoned, never killed (``hwcheck.child_run``), and its card
is ``timed_out``; the other cards finish. Never beside a running engine: that is the
caller's to refuse (fleetd does, with exit 4 in fleetctl).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from hwcheck.child_run import json_records, run_child_streaming
from hwcheck.memtest.patterns import PATTERNS, pattern_sweeps
from hwcheck.memtest.results import (
    CardMemtest,
    MemtestOutcome,
    MemtestPlan,
    MemtestProgress,
    ProgressSink,
)
from hwcheck.thermal_stop import StopAsked, StopWatch, no_stop

SILENCE_S = 90.0  # context, allocation and the JIT before the first line; a sweep after that
BASE_TIMEOUT_S = 120.0
SLOWEST_GIB_PER_S = 10.0  # the slowest sweep a healthy card is allowed (they do ~1,000)
LARGEST_CARD_GIB = 128  # the time limit's size when the run tests all free memory


def timeout_s(plan: MemtestPlan, card_gib: float = LARGEST_CARD_GIB) -> float:
    """The most one card's test may take: every sweep at the slowest rate, plus the stress mode."""
    gib = card_gib if plan.mib is None else min(plan.mib / 1024, card_gib)
    sweeps = sum(len(pattern_sweeps(name, 0)) for name in plan.patterns if name in PATTERNS)
    return BASE_TIMEOUT_S + plan.passes * sweeps * 2 * gib / SLOWEST_GIB_PER_S + plan.stress_s


def parse_child_output(text: str, card: int, timed_out: bool) -> CardMemtest:
    """The child's result line as a result; none is a timeout or a failure to run."""
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


def progress_of(line: str, card: int) -> MemtestProgress | None:
    """The progress a child's line reports, if it is a progress line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("progress"), dict):
        return None
    try:
        return MemtestProgress.from_dict(card, record["progress"])
    except (TypeError, ValueError):
        return None


class SubprocessMemtester:
    """The real test: one child Python process per card, driving libcuda through ctypes."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        silence_s: float = SILENCE_S,
        card_gib: float = LARGEST_CARD_GIB,
    ) -> None:
        self._env = env
        self._silence_s = silence_s
        self._card_gib = card_gib

    def test(
        self, card: int, plan: MemtestPlan, progress: ProgressSink, stop: StopAsked = no_stop
    ) -> CardMemtest:
        """Run ``plan`` on card ``card`` (NVML index) and return its result.

        ``stop`` (the thermal guard, NVML in this process) is asked every second while the
        child runs; its reason goes into the stop file the child looks for between steps.
        """
        env = dict(os.environ if self._env is None else self._env)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        with tempfile.TemporaryDirectory(prefix="cmpfleet-memtest-") as scratch:
            stop_file = Path(scratch) / "stop"
            child_plan = dataclasses.replace(plan, stop_file=str(stop_file))
            with StopWatch(stop, stop_file):
                return self._run(card, child_plan, progress, env)

    def _run(
        self, card: int, plan: MemtestPlan, progress: ProgressSink, env: dict[str, str]
    ) -> CardMemtest:
        argv = [sys.executable, "-m", "hwcheck.memtest.child", str(card)]
        argv.append(json.dumps(plan.as_dict()))

        def on_line(line: str) -> None:
            found = progress_of(line, card)
            if found is not None:
                progress(found)

        done = run_child_streaming(
            argv,
            env,
            silence_s=self._silence_s,
            limit_s=timeout_s(plan, self._card_gib),
            what=f"memory test of card {card}",
            on_line=on_line,
        )
        return parse_child_output(done.stdout, card, done.timed_out)
