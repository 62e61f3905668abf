"""fleetd's canary runner: a round after every engine start reaches ready, then on a schedule.

Rounds run on the runner's own thread, one at a time (a lock shared with ``run_now``, the
API's "run one now"), and the suite skips a round while the engine is busy. Results go to
the store; a canary whose judged result changes (skipped rounds judge nothing) records a
``canary`` event, which alerting picks up like any other. A round that times out is a
result, so it never holds the daemon: shutdown waits at most the round in flight.

The deep round (``serving.canary.deep``) runs on its own schedule (``daemon.canaries.
deep_schedule``) on the same thread and lock. Every verdict is stamped with the build
the engine run serving now is (``build_of``); a deep verdict judges the build, so it stays
current across restarts of the same build, and a change to ``fail`` names the last build
the canary passed on. After each round, ``on_round`` hears its results (``[canary]
on_fail``).

One runner per engine (``daemon.canaries.engines``): ``engine`` names a side engine
(``[serving] run``), whose rows, events and log lines carry its profile; ``None`` is the
primary engine, whose rows and words are what they were with one engine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from daemon.canaries.builds_view import regression_line
from daemon.canaries.check import STALE, canary_reading, is_stale
from daemon.canaries.deep_schedule import DeepSchedule
from daemon.store import CanaryRow, Store, StoreError
from hwcheck.checks.readings import CanaryReading
from hwcheck.model import EventKind, Severity
from hwcheck.threads import CrashReport, ServiceThread
from serving.canary.client import EngineApi, HttpEngineApi
from serving.canary.deep import DeepRound
from serving.canary.model import (
    CANARY_NAMES,
    DEEP_NAMES,
    CanaryResult,
    Outcome,
    Verdict,
    worst_exit_code,
)
from serving.canary.settings import CanarySettings
from serving.canary.suite import CanarySuite, Expectations
from serving.errors import Conflict
from serving.runtime.states import ServingState

log = logging.getLogger("fleetd.canary")

TICK_S = 1.0
JOIN_S = 5.0

ServingStatus = Callable[[], dict[str, Any]]
# The build id of an engine run (its ``pid@since`` mark), waiting up to the seconds given.
BuildOf = Callable[[str, float], int | None]
BUILD_WAIT_S = 5.0


# The states of an engine run ended by a stop (a person's, or recovery's) or already
# followed by the next: a crash reads backoff, held or failed, a hang unhealthy.
_STOPPED_STATES = frozenset(
    {ServingState.STOPPING, ServingState.STOPPED, ServingState.STARTING, ServingState.READY}
)


def ready_mark(serving: dict[str, Any]) -> str:
    """The engine run's mark, ``pid@since`` (``daemon.engine.builds`` uses the same)."""
    return f"{serving.get('pid')}@{serving.get('since')}"


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
        build_of: BuildOf | None = None,
        on_round: Callable[[list[CanaryResult]], None] | None = None,
        engine: str | None = None,
    ) -> None:
        self._settings = settings
        self._engine = engine
        # A side engine's log lines and events name it; the primary's read as with one engine.
        self._prefix = "" if engine is None else f"engine {engine}: "
        self._store = store
        self._serving_status = serving_status
        self._model = model
        self._expectations = expectations
        self._power_brake_active = power_brake_active
        self._api_factory = api_factory
        self._round_lock = threading.Lock()
        self._thread = ServiceThread.every(
            "canary" if engine is None else f"canary-{engine}",
            tick_s,
            self._tick_logged,
            on_crash=on_crash,
            log=log,
        )
        self._judged: dict[str, CanaryRow] = {}
        self._ready_seen: str | None = None
        self._next_due_s = float("inf")
        self._build_of = build_of
        self._on_round = on_round
        self._deep = DeepSchedule(settings.deep_interval_h)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Load the last judged results and start the schedule thread (when enabled)."""
        try:
            self._judged = self._store.latest_canary_results(judged_only=True, engine=self._engine)
        except StoreError as exc:
            log.warning("canary history not read: %s", exc)
        deep = [row.ts for name, row in self._judged.items() if name in DEEP_NAMES]
        self._deep.load(max(deep) if deep else None)
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
        elif self._deep.due():
            self._deep_round("scheduled", serving, force=False)

    # -- rounds ------------------------------------------------------------------------
    def run_now(self, force: bool = False, deep: bool = False) -> dict[str, Any]:
        """One round now (``POST /api/v1/canary/run``); waits for a round in flight first.

        ``deep``: the deep round instead of the short one.
        """
        serving = self._serving_status()
        if serving.get("state") != "ready" or not serving.get("url"):
            raise Conflict(
                f"the engine is not ready (state {serving.get('state')}): canaries need it ready",
                "engine_not_ready",
            )
        if deep:
            results = self._deep_round("asked for", serving, force=force)
        else:
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
            results = self._unless_cut_by_a_stop(results, serving)
            self._next_due_s = time.monotonic() + self._settings.interval_s
            summary = ", ".join(f"{r.name} {r.result}" for r in results)
            log.info(
                "%scanary round (%s, %.1f s): %s",
                self._prefix,
                why,
                time.monotonic() - started,
                summary,
            )
            self._persist(results, serving)
        self._after_round(results)
        return results

    def _deep_round(self, why: str, serving: dict[str, Any], force: bool) -> list[CanaryResult]:
        with self._round_lock:
            model = self._model() if callable(self._model) else self._model
            expected = self._expectations
            expectations = expected() if callable(expected) else expected
            api = self._api_factory(str(serving["url"]), model)
            deep = DeepRound(api, self._settings, expectations)
            started = time.monotonic()
            try:
                results = deep.run(force=force)
            finally:
                api.close()
            results = self._unless_cut_by_a_stop(results, serving)
            self._deep.ran(interrupted=deep.interrupted is not None)
            summary = ", ".join(f"{r.name} {r.result}" for r in results)
            log.info(
                "%sdeep canary round (%s, %.1f s): %s",
                self._prefix,
                why,
                time.monotonic() - started,
                summary,
            )
            self._persist(results, serving)
        self._after_round(results)
        return results

    def _unless_cut_by_a_stop(
        self, results: list[CanaryResult], serving: dict[str, Any]
    ) -> list[CanaryResult]:
        """The round's results, its misses skipped when the engine run was stopped under it.

        A person's restart (or recovery's stop) in the middle of a round cuts its requests
        short: a throughput stream ends early, a reply never comes. That says nothing of the
        build, yet a ``fail`` would be stamped on it (no longer the last good build, a
        rollback with nowhere to go) and ``on_fail`` would act on it. A pass stands: what it
        measured, it measured on the run it was stamped with. So does everything when the
        run did not end by a stop: an engine that crashed or hung under a canary (a long
        context it cannot take) is what the canary is there to catch.
        """
        now = self._serving_status()
        if now.get("state") == ServingState.READY and ready_mark(now) == ready_mark(serving):
            return results
        if now.get("state") not in _STOPPED_STATES or now.get("crash_class") is not None:
            return results
        why = f"the engine run stopped during the round (now {now.get('state')})"
        return [
            result
            if result.result in (Outcome.PASS, Outcome.SKIPPED)
            else CanaryResult.of(
                result.name,
                result.unit,
                Verdict(Outcome.SKIPPED, None, why, "runs when the engine is ready"),
                result.duration_s,
                result.ts,
            )
            for result in results
        ]

    def _after_round(self, results: list[CanaryResult]) -> None:
        if self._on_round is None:
            return
        try:
            self._on_round(results)
        except Exception:  # acting on a round must never break the schedule
            log.exception("acting on the canary round failed")

    def _build_id(self, serving: dict[str, Any], wait_s: float = 0.0) -> int | None:
        if self._build_of is None or serving.get("state") != "ready":
            return None
        return self._build_of(ready_mark(serving), wait_s)

    def _persist(self, results: list[CanaryResult], serving: dict[str, Any]) -> None:
        build_id = self._build_id(serving, BUILD_WAIT_S)
        try:
            rows = self._store.record_canary_results(
                [
                    {**r.as_dict(), "ts": r.ts, "result": r.result.value, "build_id": build_id}
                    for r in results
                ],
                engine=self._engine,
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
        message = f"{self._prefix}canary {row.name}: {row.result}{was}: {row.message}"
        regression = None
        if outcome is not Outcome.PASS and row.build_id is not None:
            regression = regression_line(self._store, row.name, row.build_id)
        if regression:
            message += f"; regression: {regression}"
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
                    "build_id": row.build_id,
                    "regression": regression,
                    **({} if self._engine is None else {"engine": self._engine}),
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
            judged = self._store.latest_canary_results(judged_only=True, engine=self._engine)
            latest = self._store.latest_canary_results(engine=self._engine)
        except StoreError:
            judged, latest = self._judged, {}
        entries = []
        build_id = self._build_id(serving)
        deep_run = [name for name in DEEP_NAMES if name in judged or name in latest]
        for name in (*CANARY_NAMES, *deep_run):
            row = judged.get(name) or latest.get(name)
            if row is None:
                entries.append(not_run_entry(name, "runs once the engine is ready"))
                continue
            entry = _entry(row)
            if self._stale(row, serving, build_id):
                entry["last_result"], entry["result"] = row.result, STALE
            newest = latest.get(name)
            if newest is not None and newest.id != row.id:
                entry["last_skipped_ts"] = newest.ts.isoformat()
                entry["last_skipped_reason"] = newest.message
            entries.append(entry)
        return entries

    def _stale(self, row: CanaryRow, serving: dict[str, Any], build_id: int | None) -> bool:
        """A verdict that does not judge what serves now.

        A short canary judges the engine run; a deep one judges the build, so it stays
        current over restarts of the same build (a deep round is daily).
        """
        if row.name in DEEP_NAMES and serving.get("state") == "ready" and build_id is not None:
            return row.build_id != build_id
        return is_stale(row.ts, serving)

    def reading(self) -> CanaryReading:
        """The ``engine_output`` check's reading: the verdicts on the run (or build) serving now."""
        serving = self._serving_status()
        build_id = self._build_id(serving)
        rows = list(self._judged.values())
        deep = [r for r in rows if r.name in DEEP_NAMES and not self._stale(r, serving, build_id)]
        short = [r for r in rows if r.name not in DEEP_NAMES]
        return canary_reading(short, serving, also_current=deep)

    def judged(self) -> list[CanaryRow]:
        """Each canary's last judged result, from memory (for ``/metrics``)."""
        names = (*CANARY_NAMES, *DEEP_NAMES)
        return [self._judged[name] for name in names if name in self._judged]

    def current_result(self, row: CanaryRow) -> str:
        """``row``'s result, or ``stale`` when it does not judge the engine serving now."""
        serving = self._serving_status()
        return STALE if self._stale(row, serving, self._build_id(serving)) else row.result

    def history(self, limit: int) -> list[dict[str, Any]]:
        """Stored results, newest first."""
        rows = self._store.list_canary_results(limit=limit, engine=self._engine)
        return [_entry(row) for row in rows]


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
        "build_id": row.build_id,
    }
