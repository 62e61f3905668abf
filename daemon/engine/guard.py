"""The traffic guard as fleetd runs it: the process keeper, its reports, events and usage.

``serving.guard.supervisor`` keeps the guard process (its own thread, never the poller's);
this module turns what it reports into fleetd's terms: ``guard`` events (the process
started, exited or hung; a session crossed a depth, leak or loop threshold), the totals
``/metrics`` shows (kept across guard restarts), the token use per key and hour (stored,
so ``GET /api/v1/guard/usage`` survives restarts of both), and the documents the API
and the dashboard's traffic panel read.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from daemon.store import Store, StoreError
from hwcheck.model import EventKind, Severity
from hwcheck.threads import CrashReport
from serving.guard.settings import GuardSettings
from serving.guard.supervisor import EngineView, GuardChange, GuardSupervisor
from web.metrics_model import GuardMetrics

log = logging.getLogger("fleetd.guard")

USAGE_DOCUMENT = "guard_usage"
KEEP_USAGE_H = 24 * 7
SAVE_EVERY_S = 30.0
BIND_WAIT_S = 10.0  # a guard of the fleetd before may still be letting go of the port
Defer = Callable[[Callable[[], None]], None]
UsageKey = tuple[str, int]  # (key name, hour start in epoch seconds)


class GuardBindError(Exception):
    """The guard's address cannot be bound; the message is one line naming the key."""


def bind_guard_sockets(
    settings: GuardSettings, wait_s: float = BIND_WAIT_S
) -> tuple[socket.socket, socket.socket]:
    """The public socket on ``[guard] listen`` and a loopback control socket, listening.

    Bound by fleetd at start-up (a taken port refuses the start, like the API's), held for
    fleetd's lifetime and handed to each guard process: a guard restart never loses the
    port, and clients wait in the backlog meanwhile. Both stay non-inheritable: only the
    guard gets them (``pass_fds``). An engine that inherited them (it outlives fleetd)
    kept the port bound after a fleetd restart, which then could not listen (issue 36).
    """
    host, _, port = (settings.listen or "").rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline_s = time.monotonic() + wait_s
    while True:
        public = socket.socket(family, socket.SOCK_STREAM)
        public.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            public.bind((host, int(port)))
            break
        except OSError as exc:
            public.close()
            if exc.errno != errno.EADDRINUSE or time.monotonic() >= deadline_s:
                raise GuardBindError(
                    f"guard.listen {settings.listen}: cannot listen there: {exc.strerror or exc}"
                ) from None
            time.sleep(0.2)
    public.listen(2048)
    public.set_inheritable(False)  # Python's default, said here: this is the bug it avoids
    control = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    control.bind(("127.0.0.1", 0))
    control.listen(64)
    control.set_inheritable(False)
    return public, control


@dataclass
class _Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repairs: dict[str, int] = field(default_factory=dict)  # the guard's repairs, by kind

    def plus(self, other: _Usage) -> _Usage:
        return _Usage(
            self.requests + other.requests,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            dict(Counter(self.repairs) + Counter(other.repairs)),
        )


def _repairs(row: dict[str, Any]) -> dict[str, int]:
    """A usage row's repairs (absent in rows stored before repairs existed)."""
    found = row.get("repairs")
    if not isinstance(found, dict):
        return {}
    return {str(name): int(count) for name, count in found.items() if isinstance(count, int)}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


class GuardService:
    """The guard under fleetd: started with it, stopped with it, read by API and metrics."""

    def __init__(
        self,
        settings: GuardSettings,
        sockets: tuple[socket.socket, socket.socket],
        store: Store,
        defer: Defer,
        engine: Callable[[], EngineView],
        tick_s: float,
        on_crash: CrashReport | None = None,
    ) -> None:
        self._store = store
        self._defer = defer
        self._lock = threading.Lock()
        self._report: dict[str, Any] = {}
        self._started: float | None = None  # the reporting guard's start (its identity)
        self._base: Counter[str] = Counter()  # counters of guards before this one
        self._base_signs: Counter[str] = Counter()
        self._base_usage: dict[UsageKey, _Usage] = {}
        self._usage: dict[UsageKey, _Usage] = {}  # this guard's, as last reported
        self._saved_s = 0.0
        self._load_usage()
        self.supervisor = GuardSupervisor(
            settings, *sockets, engine, self.take_report, self.take_change, tick_s, on_crash
        )

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the guard process and its keeper."""
        self.supervisor.start()

    def stop(self) -> None:
        """Stop the guard (streams in flight get its grace) and store the usage."""
        self.supervisor.stop()
        self._save_usage()

    def sync_now(self) -> None:
        """Tell the guard now (a drain begins or ends), not at the next tick."""
        self.supervisor.sync_now()

    def in_flight(self) -> int | None:
        """Requests the guard is serving, as last reported (None: no guard answers)."""
        if not self.supervisor.up:
            return None
        with self._lock:
            found = self._report.get("in_flight")
        return found if isinstance(found, int) else None

    def drain_taken(self) -> bool:
        """True once the guard's last answer said it drains (no request passes since)."""
        with self._lock:
            return self._report.get("draining") is True

    # -- what the keeper reports ----------------------------------------------------------
    def take_change(self, change: GuardChange) -> None:
        """The guard process started, exited or hung: logged and recorded."""
        severity = Severity.INFO if change.kind == "started" else Severity.WARNING
        log.log(
            logging.INFO if severity is Severity.INFO else logging.WARNING, "%s", change.message
        )
        details = {"guard": change.kind, "pid": change.pid, "exit_code": change.exit_code}
        self._record(severity, change.message, details)

    def take_report(self, report: dict[str, Any]) -> None:
        """One sync's answer: totals (folding a restarted guard's in), usage, news as events."""
        started = report.get("started")
        with self._lock:
            if started != self._started:
                if self._started is not None:  # a new guard: fold the last one's totals in
                    self._base.update(self._report.get("counters") or {})
                    self._base_signs.update(self._report.get("signs") or {})
                    for key, used in self._usage.items():
                        self._base_usage[key] = self._base_usage.get(key, _Usage()).plus(used)
                self._started = started if isinstance(started, float | int) else None
            self._report = report
            self._usage = {
                (str(row["key"]), int(row["hour"])): _Usage(
                    int(row["requests"]),
                    int(row["prompt_tokens"]),
                    int(row["completion_tokens"]),
                    _repairs(row),
                )
                for row in report.get("usage") or []
            }
        for item in report.get("news") or []:
            details = {
                "guard": str(item.get("kind")),
                "session": item.get("session"),
                "key": item.get("key"),
                "value": item.get("value"),
            }
            self._record(Severity.WARNING, f"guard: {item.get('message')}", details)
        if time.monotonic() - self._saved_s >= SAVE_EVERY_S:
            self._saved_s = time.monotonic()
            self._defer(self._save_usage)

    def _record(self, severity: Severity, message: str, details: dict[str, Any]) -> None:
        def write() -> None:
            try:
                self._store.record_event(EventKind.GUARD, severity, message, details=details)
            except StoreError as exc:
                log.warning("guard event not stored: %s", exc)

        self._defer(write)

    # -- usage, kept in the store -------------------------------------------------------
    def _totals(self) -> dict[UsageKey, _Usage]:
        with self._lock:
            totals = dict(self._base_usage)
            for key, used in self._usage.items():
                totals[key] = totals.get(key, _Usage()).plus(used)
        return totals

    def _load_usage(self) -> None:
        try:
            document = self._store.get_document(USAGE_DOCUMENT) or {}
        except StoreError as exc:
            log.warning("guard usage not read: %s", exc)
            return
        for row in document.get("hours") or []:
            try:
                key = (str(row["key"]), int(row["hour"]))
                self._base_usage[key] = _Usage(
                    int(row["requests"]),
                    int(row["prompt_tokens"]),
                    int(row["completion_tokens"]),
                    _repairs(row),
                )
            except (KeyError, TypeError, ValueError):
                continue

    def _save_usage(self) -> None:
        oldest = int(time.time()) // 3600 * 3600 - KEEP_USAGE_H * 3600
        rows = [
            {
                "key": key,
                "hour": hour,
                "requests": used.requests,
                "prompt_tokens": used.prompt_tokens,
                "completion_tokens": used.completion_tokens,
                "repairs": used.repairs,
            }
            for (key, hour), used in sorted(self._totals().items())
            if hour >= oldest
        ]
        try:
            self._store.set_document(USAGE_DOCUMENT, {"hours": rows})
        except StoreError as exc:
            log.warning("guard usage not stored: %s", exc)

    # -- what the API, the dashboard and /metrics read ----------------------------------
    def usage(self, hours: int) -> list[dict[str, Any]]:
        """``GET /api/v1/guard/usage``: per key and hour, oldest first."""
        oldest = int(time.time()) // 3600 * 3600 - (hours - 1) * 3600
        return [
            {
                "key": key,
                "hour": _iso(hour),
                "requests": used.requests,
                "prompt_tokens": used.prompt_tokens,
                "completion_tokens": used.completion_tokens,
                "repairs": used.repairs,
            }
            for (key, hour), used in sorted(
                self._totals().items(), key=lambda i: (i[0][1], i[0][0])
            )
            if hour >= oldest
        ]

    def _counters(self) -> tuple[Counter[str], Counter[str]]:
        with self._lock:
            counters = self._base + Counter(self._report.get("counters") or {})
            signs = self._base_signs + Counter(self._report.get("signs") or {})
        return counters, signs

    def overview(self) -> dict[str, Any]:
        """``GET /api/v1/guard``: the traffic panel's document."""
        counters, signs = self._counters()
        with self._lock:
            sessions = [dict(row) for row in self._report.get("sessions") or []]
        for row in sessions:
            row["first_seen"] = _iso(float(row["first_seen"]))
            row["last_seen"] = _iso(float(row["last_seen"]))
        return {
            "listen": self.supervisor.address,
            "up": self.supervisor.up,
            "restarts": self.supervisor.restarts,
            "counters": dict(counters),
            "signs": dict(signs),
            "sessions": sessions,
            "leaks_last_hour": sum(int(row.get("leaks_last_hour", 0)) for row in sessions),
            "loops_last_hour": sum(int(row.get("loops_last_hour", 0)) for row in sessions),
            "repairs": self._report.get("repairs") or {},
            "queue": self._report.get("queue") or {},
        }

    def summary(self) -> dict[str, Any]:
        """The status's ``serving.guard``: where it listens, whether it is up, what it saw."""
        counters, _ = self._counters()
        with self._lock:
            sessions = list(self._report.get("sessions") or [])
        return {
            "listen": self.supervisor.address,
            "up": self.supervisor.up,
            "sessions": len(sessions),
            "refused": int(counters.get("cap_refused", 0)),
            "leaks_last_hour": sum(int(row.get("leaks_last_hour", 0)) for row in sessions),
            "loops_last_hour": sum(int(row.get("loops_last_hour", 0)) for row in sessions),
        }

    def metrics(self) -> GuardMetrics:
        """The guard's part of ``/metrics``."""
        counters, signs = self._counters()
        tokens: Counter[tuple[str, str]] = Counter()
        repairs: Counter[tuple[str, str]] = Counter()
        for (key, _), used in self._totals().items():
            tokens[(key, "prompt")] += used.prompt_tokens
            tokens[(key, "completion")] += used.completion_tokens
            for name, count in used.repairs.items():
                repairs[(key, name)] += count
        with self._lock:
            sessions = list(self._report.get("sessions") or [])
            queue = self._report.get("queue") or {}
        depths = [int(row.get("depth_tokens", 0)) for row in sessions]
        return GuardMetrics(
            up=self.supervisor.up,
            restarts=self.supervisor.restarts,
            counters=dict(counters),
            signs=dict(signs),
            tokens=dict(tokens),
            sessions=len(sessions),
            deepest_session_tokens=max(depths) if depths else None,
            repairs=dict(repairs),
            queue=dict(queue),
        )
