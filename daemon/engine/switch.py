"""``fleetctl serve NAME``: stop the running engine cleanly, switch profile, start NAME.

Owners' scripts stop every profile before starting one; this does the same, on record.
Before anything stops, what would refuse NAME whatever the engine does is refused at once:
an unknown name (``NotFound``, naming the known ones), and what recovery's start gate
refuses for NAME's recipe now (the reboot latch, NAME's lint errors, a gating check on
NAME's cards, and NAME's port or cards held by another process, named): a person's
restart is refused the same way before its stop, and a refused switch leaves the engine
serving. Then, on a thread of its own (a clean stop takes up to twice
``stop_timeout_s``), ``--stop-foreign`` stops the foreign containers holding NAME's port
or cards, signal by signal (one that will not stop ends the switch there, the engine still
serving), recovery stops the engine with its own graceful signals (``request_stop``,
recorded like a start), NAME becomes the profile in force (an event and an audit row; kept
across fleetd restarts), and recovery's one start path (``request_start``, the start a
person's ``fleetctl start``
asks for) decides and starts it, the CUDA probe and the mechanics' preflight included. The
switch's progress is the status document's ``serving.switch``; ``fleetctl serve`` follows it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import Any, Protocol

from daemon.engine.actions import refusal_document
from daemon.engine.foreign_stop import unstopped_refusal
from daemon.engine.preflight import rig_cards
from daemon.engine.recovery_requests import RecoveryRequests
from daemon.rig.monitor import RigMonitor
from hwcheck.model import RigProfile
from hwcheck.threads import run_in_thread
from recovery.decisions import Reason
from recovery.facts import Trigger
from recovery.starts import StartAnswer
from serving.errors import Conflict, Refused, Unavailable
from serving.profiles import ProfileSet
from serving.recipe.build import recipe_hash
from serving.recipe.findings import exit_code
from serving.recipe.lint import lint_recipe
from serving.recipe.recipe import Recipe
from serving.runtime.states import ServingState, ServingStatus, SupervisorClosed

log = logging.getLogger("fleetd.engine")

RUNNING_STATES = frozenset({ServingState.STARTING, ServingState.READY, ServingState.UNHEALTHY})
VERDICTS = {0: "clean", 1: "warnings", 2: "errors"}


class ServingStatusSource(Protocol):
    """The supervisor as a switch reads it: its status (the drift, the last reason)."""

    def status(self) -> ServingStatus:
        """The supervisor's status now."""
        ...


class SwitchedEngine(Protocol):
    """The engine service as a switch drives it (``daemon.engine.service.EngineService``).

    Declared here, not imported: the service builds its switcher, so the switcher names
    only what it uses of the service (its profiles, its state, the checks before a stop,
    the foreign stop and the activation of the profile in force).
    """

    @property
    def profiles(self) -> ProfileSet:
        """Every profile of the rig."""
        ...

    @property
    def profile(self) -> str:
        """The profile in force."""
        ...

    @property
    def pinned_image(self) -> str | None:
        """The image a rollback pinned the profile in force to (None: its recipe's)."""
        ...

    @property
    def supervisor(self) -> ServingStatusSource:
        """The engine's supervisor (its status)."""
        ...

    def state(self) -> tuple[ServingState, int | None]:
        """The engine's state and pid."""
        ...

    def status_document(self) -> dict[str, Any]:
        """The status document's ``serving`` part."""
        ...

    def held_for(self, recipe: Recipe, stop_foreign: bool) -> tuple[Reason, ...]:
        """What holds ``recipe``'s port or cards now, the running engine (ours) aside."""
        ...

    def recipe_cards(self, recipe: Recipe | None = None) -> frozenset[int] | None:
        """The cards whose checks gate a start of ``recipe``."""
        ...

    def lint_errors(self, recipe: Recipe | None = None) -> tuple[str, ...]:
        """The lint errors (one line each) of ``recipe``."""
        ...

    def build_labels(self, recipe: Recipe) -> dict[str, str] | None:
        """The provenance labels the newest build of ``recipe`` recorded."""
        ...

    def refused(self, action: str, refusals: tuple[Reason, ...], actor: str) -> Refused:
        """A refusal given before anything moved, audited."""
        ...

    def stop_foreign(self, actor: str, recipe: Recipe | None = None) -> list[dict[str, Any]]:
        """Stop the foreign containers holding ``recipe``'s port or cards."""
        ...

    def activate(self, name: str, actor: str, image: str | None = None) -> str:
        """Make profile ``name`` (with ``image`` pinned, if any) the one in force."""
        ...


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ProfileSwitcher:
    """Switches the engine between profiles, one switch at a time."""

    def __init__(
        self,
        engine: SwitchedEngine,
        monitor: RigMonitor,
        rig: RigProfile,
        starts: RecoveryRequests,
    ) -> None:
        self._engine = engine
        self._monitor = monitor
        self._rig = rig
        self._starts = starts
        self._lock = threading.Lock()
        self._progress: dict[str, Any] | None = None

    def progress(self) -> dict[str, Any] | None:
        """The switch in progress, or the last one (``serving.switch``)."""
        with self._lock:
            return None if self._progress is None else dict(self._progress)

    def _set(self, **changes: Any) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.update(changes)

    def switch(
        self, name: str, actor: str, stop_foreign: bool = False, image: str | None = None
    ) -> dict[str, Any]:
        """Begin switching to profile ``name``; refusals that need no stop come at once.

        ``image``: run NAME with this image reference (a rollback's digest); a switch
        without one ends an earlier pin, so ``serve`` of the profile in force while pinned
        goes back to its recipe's image.
        """
        engine = self._engine
        profile = engine.profiles.get(name)  # NotFound names the known ones
        with self._lock:
            if self._progress is not None and self._progress["phase"] in ("stopping", "starting"):
                raise Conflict(
                    f"a switch to {self._progress['profile']} is in progress",
                    "switch_in_progress",
                )
        state, pid = engine.state()
        if name == engine.profile and image == engine.pinned_image and state in RUNNING_STATES:
            return {
                "profile": name,
                "accepted": True,
                "already_active": True,
                "serving": engine.status_document(),
            }
        # Everything that would refuse NAME once the engine has stopped, asked now: the
        # gate's rules and who else holds NAME's port or cards (the running engine is
        # ours; a drifted engine NAME would adopt is NAME's own).
        held = () if self._adopts_drift(name) else engine.held_for(profile.recipe, stop_foreign)
        refusals = self._starts.start_refusals(
            engine.recipe_cards(profile.recipe), engine.lint_errors(profile.recipe), held
        )
        if refusals:
            raise engine.refused("serve", refusals, actor)
        switch_id = uuid.uuid4().hex[:12]
        with self._lock:
            self._progress = {
                "id": switch_id,
                "previous": engine.profile,
                "previous_image": engine.pinned_image,
                "profile": name,
                "image": image,
                "phase": "stopping" if pid is not None else "starting",
                "message": None,
                "refusals": [],
                "started_at": _now(),
                "ended_at": None,
            }
        run_in_thread("engine-switch", lambda: self._run(name, actor, stop_foreign, image), log=log)
        return {
            "profile": name,
            "accepted": True,
            "in_progress": True,
            "switch": self.progress(),
            "serving": engine.status_document(),
        }

    def _adopts_drift(self, name: str) -> bool:
        """True when the engine left running (a drift) is NAME's: the switch adopts it."""
        drift = self._engine.supervisor.status().drift
        return drift is not None and name in self._engine.profiles.matching(drift.recipe_hash)

    def _run(self, name: str, actor: str, stop_foreign: bool, image: str | None) -> None:
        engine = self._engine
        try:
            # The foreign holders go first, each signal by signal: one that will not stop
            # leaves the running engine serving.
            recipe = engine.profiles.get(name).recipe
            stopped = engine.stop_foreign(actor, recipe) if stop_foreign else []
            left = unstopped_refusal(stopped)
            if left is not None:
                reason = left.line
                self._set(phase="failed", message=reason, stopped_foreign=stopped, ended_at=_now())
                log.warning("switch to %s abandoned, the engine left serving: %s", name, reason)
                return
            stop = self._starts.request_stop(Trigger.SWITCH, actor, f"switching to profile {name}")
            if not stop.stopped:
                reason = engine.supervisor.status().reason or stop.why_not
                reason = reason or "the engine would not stop"
                self._set(phase="failed", message=reason, ended_at=_now())
                log.warning("switch to %s abandoned: %s", name, reason)
                return
            engine.activate(name, actor, image)
            self._set(phase="starting")
            answer = self._starts.request_start(Trigger.START_REQUEST, actor, False)
            self._ended(answer, stopped, actor)
        except (Refused, Unavailable, SupervisorClosed) as exc:
            self._set(phase="failed", message=str(exc) or type(exc).__name__, ended_at=_now())
        except Exception as exc:  # the progress must end, whatever happened
            log.exception("switch to %s failed", name)
            self._set(phase="failed", message=str(exc), ended_at=_now())

    def _ended(self, answer: StartAnswer, stopped: list[dict[str, Any]], actor: str) -> None:
        """The switch's end from the start's answer (a queued start is done, not failed).

        A refused start gives the previous profile back: what is in force is what ran
        before, and the switch's message says so (the engine stays stopped).
        """
        if answer.started:
            launched = None if answer.outcome is None else answer.outcome.launched
            queued = launched is not None and launched.pid is None
            self._set(
                phase="done",
                message="the start is still in progress" if queued else None,
                warnings=[refusal_document(w, blocking=False) for w in answer.warnings],
                stopped_foreign=stopped,
                ended_at=_now(),
            )
            return
        # A container that outlived SIGINT and SIGTERM still holds what the start needs:
        # the refusal says so first, with what was sent (it was not killed).
        left = unstopped_refusal(stopped)
        reasons = ((left,) if left is not None else ()) + answer.refusals
        refusals = [refusal_document(reason) for reason in reasons]
        why = answer.why_not or "not started"
        message = why if left is None else f"{left.line}; {why}"
        progress = self.progress() or {}
        previous, previous_image = progress.get("previous"), progress.get("previous_image")
        moved = previous != self._engine.profile or previous_image != self._engine.pinned_image
        if refusals and previous and moved:
            self._engine.activate(previous, actor, previous_image)
            message += (
                f"; profile {previous} is in force again (the engine stays stopped: "
                "fleetctl start runs it)"
            )
        self._set(
            phase="refused" if refusals else "failed",
            message=message,
            refusals=refusals,
            stopped_foreign=stopped,
            ended_at=_now(),
        )

    def profiles_document(self) -> dict[str, Any]:
        """``GET /api/v1/serving/profiles``: each profile, the one in force, lint verdicts."""
        engine = self._engine
        cards = rig_cards(self._monitor, self._rig)
        rows = []
        for name in engine.profiles.names:
            profile = engine.profiles.get(name)
            recipe = profile.recipe
            labels = engine.build_labels(recipe)
            findings = lint_recipe(recipe, host_checks=False, cards=cards, labels=labels)
            counts = {
                severity: sum(1 for f in findings if f.severity == severity)
                for severity in ("error", "warning", "note")
            }
            rows.append(
                {
                    "name": name,
                    "active": name == engine.profile,
                    "configured": name == engine.profiles.configured,
                    "source": profile.source,
                    "mode": recipe.mode,
                    "model": recipe.model,
                    "served_model_name": recipe.engine_name,
                    "gpus": recipe.gpus,
                    "family": recipe.family,
                    "recipe_hash": recipe_hash(recipe),
                    "lint": {
                        "verdict": VERDICTS[exit_code(findings)],
                        "errors": counts["error"],
                        "warnings": counts["warning"],
                        "notes": counts["note"],
                        "findings": [finding.to_dict() for finding in findings],
                    },
                }
            )
        return {
            "active": engine.profile,
            "configured": engine.profiles.configured,
            "profiles": rows,
            "switch": self.progress(),
        }
