"""After a reboot (a new boot id): re-apply caps, run every check, probe CUDA, then start.

Recovery rule 5 (docs/architecture.md "Recovery rules"), in order: the boot is recorded and
the latch cleared with an event (``daemon.rig.boot``), the power caps the reboot reset are
re-applied, the checks run on fresh samples, the CUDA probe runs with no engine beside it,
and only then the start path is asked for autostart's decision (``Trigger.BRING_UP``). What
happened, and if the engine was not started exactly why, is recorded (audit row and event)
and shown in the status (``recovery.bring_up``): the controller keeps both
(``record_bring_up``), as it keeps the host's reboot under way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from daemon.rig.caps import CapKeeper
from daemon.store import StoreError
from hwcheck.backend import BackendError, GpuBackend
from hwcheck.model import CheckResult, Severity
from recovery.controller import RecoveryController
from recovery.facts import EngineCondition, Trigger
from recovery.starts import StartAnswer

log = logging.getLogger("fleetd.recovery")

# A simulated reboot ends the engine; its supervisor notices within about a second.
ENGINE_GONE_WITHIN_S = 15.0


class BringUp:
    """The post-reboot sequence, run on the recovery worker."""

    def __init__(
        self,
        recovery: RecoveryController,
        results: Callable[[], Sequence[CheckResult]],
        caps: CapKeeper,
        gpu: GpuBackend,
        *,
        apply_caps: bool,
        judge: Callable[[], None],
    ) -> None:
        self._recovery = recovery
        self._results = results
        self._caps = caps
        self._gpu = gpu
        self._apply_caps = apply_caps
        self._judge = judge

    def run(self, boot_id: str) -> dict[str, Any]:
        """The whole sequence; returns (and keeps in the service) what it did."""
        recovery = self._recovery
        steps: list[str] = [f"boot {boot_id} recorded, latch cleared"]
        try:
            self._wait_engine_gone()
            steps.append(self._caps_step())
            self._judge()
            critical = [r for r in self._results() if r.severity is Severity.CRITICAL]
            steps.append(f"{len(critical)} critical check(s)" if critical else "every check passed")
            failed = recovery.probe("after the reboot")
            steps.append(f"CUDA probe failed: {failed}" if failed else "CUDA probe passed")
        finally:
            recovery.end_host_reboot()
        answer = recovery.request_start(Trigger.BRING_UP, actor="fleetd")
        steps.append(_engine_outcome(answer))
        return recovery.record_bring_up(boot_id, "; ".join(steps), answer)

    def _wait_engine_gone(self) -> None:
        deadline = time.monotonic() + ENGINE_GONE_WITHIN_S
        while self._recovery.engine_condition() is EngineCondition.RUNNING:
            if time.monotonic() >= deadline:
                log.warning("the engine still shows as running after the reboot")
                return
            time.sleep(0.05)

    def _caps_step(self) -> str:
        if not self._apply_caps:
            return "power caps not applied ([rig] apply_power_caps = false)"
        try:
            results = self._caps.apply(self._gpu.snapshot(), actor="bring-up")
        except (BackendError, StoreError) as exc:
            return f"power caps not re-applied: {exc}"
        applied = [r for r in results if r.outcome == "applied"]
        failed = [r for r in results if r.outcome == "failed"]
        already = [r for r in results if r.outcome == "already"]
        text = f"power cap {self._caps.target_w:g} W re-applied to {len(applied)} card(s)"
        if already:  # the first poll of the boot may have capped them a moment before
            text += f" ({len(already)} already at it)"
        if failed:
            text += f"; failed on card {failed[0].card}: {failed[0].detail}"
        return text


def _engine_outcome(answer: StartAnswer) -> str:
    if answer.started:
        return "engine started"
    return f"engine not started: {answer.why_not}"
