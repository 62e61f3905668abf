"""The frame of a prepared GPU run (``gpu_memtest_check.py``, ``gpu_carddiag_check.py``).

A device loan is short and counted: a run is one prepared script whose steps each print
their outcome, a failing step never stops the next, a watchdog writes what it has before
the loan's limit, and the JSON summary lands under ``$OUT`` (what the device tool brings
back). Standard library only: the scripts run with a rig's system Python.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


class GpuRun:
    """One run's summary, its printed steps and its watchdog."""

    def __init__(self, summary_name: str) -> None:
        self.summary_name = summary_name
        self.summary: dict[str, Any] = {
            "steps": {},
            "passed": False,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
        }

    @staticmethod
    def say(text: str = "") -> None:
        """A line now (flushed: the device tool keeps only the tail of a killed run)."""
        print(text, flush=True)

    def write_summary(self) -> None:
        """The summary as JSON under ``$OUT`` (nothing without it)."""
        out = os.environ.get("OUT")
        if not out:
            return
        path = Path(out) / self.summary_name
        path.write_text(json.dumps(self.summary, indent=2, default=str) + "\n")
        self.say(f"summary written to {path}")

    def step(self, name: str, run: Callable[[], dict[str, Any]]) -> bool:
        """Run one step, print its outcome, keep its figures; an exception fails it alone."""
        self.say(f"\n=== {name} ===")
        self.summary["current"] = name
        started_s = time.monotonic()
        try:
            figures = run()
            ok = bool(figures.pop("ok", True))
        except Exception as exc:  # a failing step must not stop the others
            figures = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            self.say(f"ERROR: {type(exc).__name__}: {exc}")
            ok = False
        figures["ok"] = ok
        figures["seconds"] = round(time.monotonic() - started_s, 2)
        self.summary["steps"][name] = figures
        self.say(f"--- {name}: {'PASS' if ok else 'FAIL'} ({figures['seconds']} s)")
        return ok

    def arm_watchdog(self, limit_s: int) -> None:
        """After ``limit_s`` seconds: say which step hung, write the summary, exit 1."""

        def watchdog(_signum: int, _frame: object) -> None:
            current = self.summary.get("current")
            self.say(f"\nWATCHDOG: {limit_s} s passed during step {current!r}")
            self.summary["watchdog"] = current
            self.write_summary()
            os._exit(1)

        signal.signal(signal.SIGALRM, watchdog)
        signal.alarm(limit_s)

    def no_gpu(self, reason: str) -> int:
        """No card to run on: said, summarised as passed (nothing to judge), exit 0."""
        self.say(f"no GPU: {reason}")
        self.summary.update(gpu=False, reason=reason, passed=True)
        self.write_summary()
        return 0
