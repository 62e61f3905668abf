"""The supervisor's vocabulary: states, settings, refusals, events, launch records, status.

Plain frozen data, so the daemon can store it, the API can serve it and tests can compare
it without a running supervisor.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hwcheck.model import Severity
from serving.recipe.masking import mask_argv, mask_env
from serving.runtime.classify import CrashClass
from serving.runtime.metrics import EngineMetrics


class ServingState(enum.StrEnum):
    """The engine's state as documented (``fleetctl status`` ``serving.state``)."""

    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    UNHEALTHY = "unhealthy"
    STOPPING = "stopping"
    BACKOFF = "backoff"
    HELD = "held"
    FAILED = "failed"


@dataclass(frozen=True)
class Refusal:
    """A reason not to start the engine (``blocking``) or a warning to show with a start.

    The supervisor's own refusals are mechanics (whether to start at all is recovery's
    start gate, before): ``code`` is stable for callers: ``port_in_use``,
    ``engine_survivors``, ``stopping``, ``stop_stuck``, ``recipe``, ``launch_failed``,
    ``superseded`` (an automatic restart nobody waits for), ``preflight_error`` and
    whatever else a preflight returns.
    """

    code: str
    message: str
    blocking: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"code": self.code, "message": self.message, "blocking": self.blocking}


class StartRefused(Exception):
    """A start (or restart) did not happen; ``refusals`` says why, one reason each."""

    def __init__(self, refusals: tuple[Refusal, ...]) -> None:
        self.refusals = refusals
        super().__init__("; ".join(f"{r.code}: {r.message}" for r in refusals))


class SupervisorClosed(Exception):
    """The supervisor was closed; it takes no more commands."""


@dataclass(frozen=True)
class StartResult:
    """The outcome of a start that was not refused."""

    pid: int | None
    already_running: bool
    warnings: tuple[Refusal, ...] = ()


class ServingChange(enum.StrEnum):
    """What changed in the engine's supervision: the kind of one :class:`ServingEvent`.

    Not the stored event kinds (``hwcheck.model.EventKind``): the daemon records each
    change as a stored ``serving`` event with this value in its details.
    """

    STATE = "state"
    LAUNCH = "launch"
    CRASH = "crash"
    REFUSED = "refused"
    ADOPTED = "adopted"
    BREAKER = "breaker"
    STOP_STUCK = "stop_stuck"
    WARNING = "warning"
    DRIFT = "drift"
    ENGINE_METRIC = (
        "engine_metric"  # one of the engine's own figures left (or came back to) its usual range
    )


@dataclass(frozen=True)
class Drift:
    """An engine runs that this fleetd did not adopt: it was launched from another recipe.

    ``recipe_hash`` is what it runs ("" when a container carries no label), and
    ``expected_hash`` the active profile's. It is left running: stopping an engine that
    nobody asked to stop is never automatic (a cold start costs 20 to 45 minutes).
    """

    pid: int
    container_name: str | None
    recipe_hash: str
    expected_hash: str
    url: str
    mode: str

    def what(self) -> str:
        """``container cmpfleet-engine (pid 4242)`` or ``pid 4242``."""
        if self.container_name:
            return f"container {self.container_name} (pid {self.pid})"
        return f"pid {self.pid}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the status document's ``serving.drift``)."""
        return {
            "pid": self.pid,
            "container_name": self.container_name,
            "recipe_hash": self.recipe_hash,
            "expected_hash": self.expected_hash,
            "url": self.url,
            "mode": self.mode,
        }


@dataclass(frozen=True)
class LaunchRecord:
    """One engine launch from start to end, re-emitted as it progresses (same launch_id).

    The daemon stores the latest version, so the next launch can be diffed against the last
    one that worked. ``env`` holds only the recipe's variables.
    """

    launch_id: str
    argv: tuple[str, ...]
    env: dict[str, str]
    recipe_hash: str
    spec_hash: str
    pid: int
    adopted: bool
    started_at: datetime
    ready_at: datetime | None = None
    ended_at: datetime | None = None
    exit_code: int | None = None
    signal: int | None = None
    crash_class: CrashClass | None = None
    end_reason: str | None = None
    profile: str | None = None
    waivers: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (times ISO 8601 with offset)."""
        return {
            "launch_id": self.launch_id,
            "argv": mask_argv(list(self.argv)),  # this form is stored and served: no secrets
            "env": mask_env(self.env),
            "recipe_hash": self.recipe_hash,
            "spec_hash": self.spec_hash,
            "pid": self.pid,
            "adopted": self.adopted,
            "started_at": self.started_at.isoformat(),
            "ready_at": None if self.ready_at is None else self.ready_at.isoformat(),
            "ended_at": None if self.ended_at is None else self.ended_at.isoformat(),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "crash_class": None if self.crash_class is None else str(self.crash_class),
            "end_reason": self.end_reason,
            "profile": self.profile,
            "lint_waived": dict(self.waivers),
        }


@dataclass(frozen=True)
class ServingEvent:
    """Something the daemon records (and may alert on)."""

    kind: ServingChange
    ts: datetime
    state: ServingState
    severity: Severity
    message: str
    crash_class: CrashClass | None = None
    evidence: str | None = None
    advice: str | None = None
    launch: LaunchRecord | None = None
    refusals: tuple[Refusal, ...] = ()
    drift: Drift | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "kind": str(self.kind),
            "ts": self.ts.isoformat(),
            "state": str(self.state),
            "severity": str(self.severity),
            "message": self.message,
            "crash_class": None if self.crash_class is None else str(self.crash_class),
            "evidence": self.evidence,
            "advice": self.advice,
            "launch": None if self.launch is None else self.launch.as_dict(),
            "refusals": [r.as_dict() for r in self.refusals],
            **({} if self.drift is None else {"drift": self.drift.as_dict()}),
        }


@dataclass(frozen=True)
class ServingStatus:
    """The ``serving`` block of ``fleetctl status``: the documented keys plus extras."""

    state: ServingState
    pid: int | None
    restarts: int
    since: datetime
    url: str | None
    reason: str | None = None
    last_log_line: str | None = None
    crash_class: CrashClass | None = None
    metrics: EngineMetrics | None = None
    adopted: bool = False
    backoff_remaining_s: float | None = None
    last_refusal: tuple[Refusal, ...] = field(default_factory=tuple)
    drift: Drift | None = None
    # The monotonic deadline of a backoff: ``backoff_remaining_s`` is computed from it
    # when the status is read, so it counts down between state changes. Not served.
    backoff_until_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{state, pid, restarts, since, url}`` as documented, then the extras."""
        return {
            "state": str(self.state),
            "pid": self.pid,
            "restarts": self.restarts,
            "since": self.since.isoformat(),
            "url": self.url,
            "reason": self.reason,
            "last_log_line": self.last_log_line,
            "crash_class": None if self.crash_class is None else str(self.crash_class),
            "metrics": None if self.metrics is None else self.metrics.as_dict(),
            "adopted": self.adopted,
            "backoff_remaining_s": self.backoff_remaining_s,
            "last_refusal": [r.as_dict() for r in self.last_refusal],
            "drift": None if self.drift is None else self.drift.as_dict(),
        }
