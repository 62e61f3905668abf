"""Who runs a card diagnostic: a child process per card on a rig, the scenario when simulated."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Protocol

from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan
from hwcheck.carddiag.pcie import LinkFigures
from hwcheck.child_run import json_records, run_child
from hwcheck.thermal_stop import StopAsked, StopWatch

BASE_TIMEOUT_S = 180.0  # context, module JIT, and a card that answers slowly


class Diagnoser(Protocol):
    """Runs one diagnostic on one card; ``stop`` (the thermal guard) is asked between steps."""

    def compute(self, card: int, plan: DiagPlan, stop: StopAsked) -> CardDiag:
        """The compute units' result."""
        ...

    def link(self, card: int, plan: DiagPlan, stop: StopAsked) -> LinkFigures | CardDiag:
        """The link's figures, or a result when none could be measured (error, too hot)."""
        ...


class SubprocessDiagnoser:
    """The real diagnostics: a child Python process per card, libcuda through ctypes."""

    def __init__(self, env: dict[str, str] | None = None, timeout_s: float = BASE_TIMEOUT_S):
        self._env = env
        self._timeout_s = timeout_s

    def _run(
        self, card: int, plan: DiagPlan, stop: StopAsked
    ) -> tuple[dict[str, object], str | None]:
        env = dict(os.environ if self._env is None else self._env)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        with tempfile.TemporaryDirectory(prefix="cmpfleet-diag-") as scratch:
            stop_file = Path(scratch) / "stop"
            child_plan = DiagPlan(
                plan.kind, plan.seconds, plan.transfer_mib, plan.repeats, str(stop_file)
            )
            argv = [sys.executable, "-m", "hwcheck.carddiag.child", str(card)]
            argv.append(json.dumps(child_plan.as_dict()))
            with StopWatch(stop, stop_file) as watch:
                done = run_child(
                    argv,
                    env,
                    self._timeout_s + plan.seconds,
                    f"{plan.kind} diagnostic of card {card}",
                )
        for record in json_records(done.stdout):
            return record, watch.reason
        if done.timed_out:
            return {"timed_out": True}, watch.reason
        return {}, watch.reason

    def compute(self, card: int, plan: DiagPlan, stop: StopAsked) -> CardDiag:
        """Card ``card``'s compute units, in a child."""
        record, _ = self._run(card, plan, stop)
        return _as_result(card, DiagKind.COMPUTE, record) or CardDiag.from_dict(record)

    def link(self, card: int, plan: DiagPlan, stop: StopAsked) -> LinkFigures | CardDiag:
        """Card ``card``'s link figures, in a child."""
        record, _ = self._run(card, plan, stop)
        failed = _as_result(card, DiagKind.PCIE, record)
        if failed is not None:
            return failed
        if "stopped" in record:
            verdict = f"stopped hot ({record['stopped']}) before the link was measured"
            return CardDiag(card, DiagKind.PCIE, DiagOutcome.STOPPED_HOT, verdict)
        if "outcome" in record:
            return CardDiag.from_dict(record)
        measured = record.get("measured")
        if not isinstance(measured, dict):
            return CardDiag(card, DiagKind.PCIE, DiagOutcome.ERROR, error="no result")
        return LinkFigures(
            float(measured["h2d_gb_per_s"]),
            float(measured["d2h_gb_per_s"]),
            int(measured["mismatched_bytes"]),
            int(measured["compared_bytes"]),
        )


def _as_result(card: int, kind: DiagKind, record: dict[str, object]) -> CardDiag | None:
    """A result for a child that could not run (no driver, hung, no answer); else None."""
    if "unavailable" in record:
        return CardDiag(card, kind, DiagOutcome.UNAVAILABLE, error=str(record["unavailable"]))
    if record.get("timed_out"):
        return CardDiag(card, kind, DiagOutcome.TIMED_OUT, error="the card did not answer in time")
    if not record:
        return CardDiag(card, kind, DiagOutcome.ERROR, error="the child ended without a result")
    return None
