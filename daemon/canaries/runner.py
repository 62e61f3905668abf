"""fleetd's canary runner: a round after every engine start reaches ready, then on a schedule.

Rounds run on the runner's own thread, one at a time (a lock shared with ``run_now``, the
API's "run one now"), and the suite skips a round while the engine is busy. Results go to
the store; a canary whose judged result changes (skipped rounds judge nothing) records a
``canary`` event, which alerting picks up like any other. A round that times out is a
result, so it never holds the daemon: shutdown waits at most the round in flight.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from daemon.canaries.check import STALE, canary_reading, is_stale
from daemon.store import CanaryRow, Store, StoreError
from hwcheck.checks.readings import CanaryReading
from hwcheck.model import EventKind, Severity
from hwcheck.threads import CrashReport, ServiceThread
from serving.canary.client import EngineApi, HttpEngineApi
from serving.canary.model import CANARY_NAMES, CanaryResult, Outcome, worst_exit_code
from serving.canary.settings import CanarySettings
from serving.canary.suite import CanarySuite, Expectations
from serving.errors import Conflict

log = logging.getLogger("fleetd.canary")

TICK_S = 1.0
JOIN_S = 5.0

ServingStatus = Callable[[], dict[str, Any]]


class CanaryRunner:
    """Schedules canary rounds against the engine and keeps their results."""

    def __init__(
        self,
        settings: CanarySettings,
        store: Store,
        serving_status: ServingStatus,
        model: str | Callable[[], str],
        expectations: Expectations | Callable[[], Expectations],
        power_brake_active: Callable[[], bool],
        api_factory: Callable[[str, str], EngineApi] = HttpEngineApi,
        tick_s: float = TICK_S,
        on_crash: CrashReport | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._serving_status = serving_status
        self._model = model
        self._expectations = expectations
        self._power_brake_active = power_brake_active
        self._api_factory = api_factory
        self._round_lock = threading.Lock()
        self._thread = ServiceThread.every(
            "canary", tick_s, self._tick_logged, on_crash=on_crash, log=log
        )
        self._judged: dict[str, CanaryRow] = {}
        self._ready_seen: str | None = None
        self._next_due_s = float("inf")

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Load the last judged results and start the schedule thread (when enabled)."""
        try:
            self._judged = self._store.latest_canary_results(judged_only=True)
        except StoreError as exc:
            log.warning("canary history not read: %s", exc)
        if not self._settings.enabled:
            return
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling; a round in flight ends at its own timeouts (the thread is a daemon)."""
        self._thread.stop(JOIN_S)

    def _tick_logged(self) -> None:
        try:
            self._tick()
        except Exception:  # the schedule must survive anything one round does
            log.exception("canary round failed; the next one is still scheduled")

    def _tick(self) -> None:
        serving = self._serving_status()
        if serving.get("state") != "ready" or not serving.get("url"):
            return
        ready_mark = f"{serving.get('pid')}@{serving.get('since')}"
        if self._ready_seen != ready_mark:
            self._ready_seen = ready_mark
            if self._settings.after_ready:
                self._round("the engine reached ready", serving, force=False)
                return
            self._next_due_s = time.monotonic() + self._settings.interval_s
        if time.monotonic() >= self._next_due_s:
            self._round("scheduled", serving, force=False)

    # -- rounds ------------------------------------------------------------------------
    def run_now(self, force: bool = False) -> dict[str, Any]:
        """One round now (``POST /api/v1/canary/run``); waits for a round in flight first."""
        serving = self._serving_status()
        if serving.get("state") != "ready" or not serving.get("url"):
            raise Conflict(
                f"the engine is not ready (state {serving.get('state')}): canaries need it ready",
                "engine_not_ready",
            )
        results = self._round("asked for", serving, force=force)
        return {
            "canaries": [r.as_dict() for r in results],
            "exit_code": worst_exit_code(results),
        }

    def _round(self, why: str, serving: dict[str, Any], force: bool) -> list[CanaryResult]:
        with self._round_lock:
            # Read at each round: a profile switch changes the served name and expectations.
            model = self._model() if callable(self._model) else self._model
            expected = self._expectations
            expectations = expected() if callable(expected) else expected
            api = self._api_factory(str(serving["url"]), model)
            suite = CanarySuite(api, self._settings, expectations, self._power_brake_active)
            started = time.monotonic()
            try:
                results = suite.run_round(force=force)
            finally:
                api.close()
            self._next_due_s = time.monotonic() + self._settings.interval_s
            summary = ", ".join(f"{r.name} {r.result}" for r in results)
            log.info("canary round (%s, %.1f s): %s", why, time.monotonic() - started, summary)
            self._persist(results)
            return results

    def _persist(self, results: list[CanaryResult]) -> None:
        try:
            rows = self._store.record_canary_results(
                [{**r.as_dict(), "ts": r.ts, "result": r.result.value} for r in results]
            )
        except StoreError as exc:
            log.error("canary results not stored: %s", exc)
            return
        for row in rows:
            if row.result == Outcome.SKIPPED:
                continue
            before = self._judged.get(row.name)
            self._judged[row.name] = row
            if before is None and row.result == Outcome.PASS:
                continue
            if before is not None and before.result == row.result:
                continue
            self._record_change(before, row)

    def _record_change(self, before: CanaryRow | None, row: CanaryRow) -> None:
        outcome = Outcome(row.result)
        severity = Severity.INFO if outcome is Outcome.PASS else outcome.severity
        was = "" if before is None else f" (was {before.result})"
        message = f"canary {row.name}: {row.result}{was}: {row.message}"
        log.log(logging.INFO if outcome is Outcome.PASS else logging.WARNING, "%s", message)
        try:
            self._store.record_event(
                EventKind.CANARY,
                severity,
                message,
                details={
                    "canary": row.name,
                    "result": row.result,
                    "figure": row.figure,
                    "advice": row.advice,
                    "previous": None if before is None else before.result,
                },
            )
        except StoreError as exc:
            log.error("canary event not stored: %s", exc)

    # -- reads -------------------------------------------------------------------------
    def status_entries(self) -> list[dict[str, Any]]:
        """The status's ``canaries`` list: each canary's last judged result (else its last one).

        A skipped round (busy engine) does not hide the last real verdict: the entry keeps
        it and says when the canary was last skipped. A verdict from before the engine's
        current run (or with the engine not ready) is ``stale``, its old result kept as
        ``last_result``.
        """
        serving = self._serving_status()
        try:
            judged = self._store.latest_canary_results(judged_only=True)
            latest = self._store.latest_canary_results()
        except StoreError:
            judged, latest = self._judged, {}
        entries = []
        for name in CANARY_NAMES:
            row = judged.get(name) or latest.get(name)
            if row is None:
                entries.append(not_run_entry(name, "runs once the engine is ready"))
                continue
            entry = _entry(row)
            if is_stale(row.ts, serving):
                entry["last_result"], entry["result"] = row.result, STALE
            newest = latest.get(name)
            if newest is not None and newest.id != row.id:
                entry["last_skipped_ts"] = newest.ts.isoformat()
                entry["last_skipped_reason"] = newest.message
            entries.append(entry)
        return entries

    def reading(self) -> CanaryReading:
        """The ``engine_output`` check's reading: the verdicts and the engine run serving now."""
        return canary_reading(list(self._judged.values()), self._serving_status())

    def judged(self) -> list[CanaryRow]:
        """Each canary's last judged result, from memory (for ``/metrics``)."""
        return [self._judged[name] for name in CANARY_NAMES if name in self._judged]

    def current_result(self, row: CanaryRow) -> str:
        """``row``'s result, or ``stale`` when it does not judge the engine serving now."""
        return STALE if is_stale(row.ts, self._serving_status()) else row.result

    def history(self, limit: int) -> list[dict[str, Any]]:
        """Stored results, newest first."""
        return [_entry(row) for row in self._store.list_canary_results(limit=limit)]


def not_run_entry(name: str, advice: str) -> dict[str, Any]:
    """A canary with no result yet: ``skipped``, no figure, no time (the status lists each)."""
    return {"name": name, "result": "skipped", "figure": None, "advice": advice, "ts": None}


def _entry(row: CanaryRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "result": row.result,
        "figure": row.figure,
        "advice": row.advice,
        "ts": row.ts.isoformat(),
        "unit": row.unit,
        "message": row.message,
        "duration_s": row.duration_s,
        "details": row.details or {},
    }
