"""``fleetctl serve NAME``: stop the running engine cleanly, switch profile, start NAME.

Owners' scripts stop every profile before starting one; this does the same, on record.
Before anything stops, what would refuse NAME whatever the rig does is checked: an
unknown name (``NotFound``, naming the known ones), the reboot latch, NAME's lint errors.
Then, on a thread of its own (a clean stop takes up to twice ``stop_timeout_s``), the
engine is stopped with its own graceful signals, NAME becomes the profile in force (an
event and an audit row; kept across fleetd restarts), and the very ``start`` a person's
``fleetctl start`` calls starts it, the start gate and preflight included. The switch's
progress is the status document's ``serving.switch``; ``fleetctl serve`` follows it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from daemon.engine_preflight import lint_refusals, rig_cards
from daemon.monitor import RigMonitor
from hwcheck.model import RigProfile
from serving.errors import Conflict, Refused
from serving.recipe.build import recipe_hash
from serving.recipe.findings import exit_code
from serving.recipe.lint import lint_recipe
from serving.runtime.states import ServingState, StartRefused, SupervisorClosed

if TYPE_CHECKING:
    from daemon.engine_service import EngineService

log = logging.getLogger("fleetd.engine")

RUNNING_STATES = frozenset({ServingState.STARTING, ServingState.READY, ServingState.UNHEALTHY})
VERDICTS = {0: "clean", 1: "warnings", 2: "errors"}


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ProfileSwitcher:
    """Switches the engine between profiles, one switch at a time."""

    def __init__(self, engine: EngineService, monitor: RigMonitor, rig: RigProfile) -> None:
        self._engine = engine
        self._monitor = monitor
        self._rig = rig
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

    def switch(self, name: str, actor: str, stop_foreign: bool = False) -> dict[str, Any]:
        """Begin switching to profile ``name``; refusals that need no stop come at once."""
        engine = self._engine
        profile = engine.profiles.get(name)  # NotFound names the known ones
        with self._lock:
            if self._progress is not None and self._progress["phase"] in ("stopping", "starting"):
                raise Conflict(
                    f"a switch to {self._progress['profile']} is in progress",
                    "switch_in_progress",
                )
        state, pid = engine.state()
        if name == engine.profile and state in RUNNING_STATES:
            return {
                "profile": name,
                "accepted": True,
                "already_active": True,
                "serving": engine.status_document(),
            }
        refusals = engine.latch_refusals()
        refusals += lint_refusals(profile.recipe, rig_cards(self._monitor, self._rig))
        if refusals:
            raise engine.refused("serve", StartRefused(tuple(refusals)), actor)
        switch_id = uuid.uuid4().hex[:12]
        with self._lock:
            self._progress = {
                "id": switch_id,
                "previous": engine.profile,
                "profile": name,
                "phase": "stopping" if pid is not None else "starting",
                "message": None,
                "refusals": [],
                "started_at": _now(),
                "ended_at": None,
            }
        threading.Thread(
            target=self._run, args=(name, actor, stop_foreign), name="engine-switch", daemon=True
        ).start()
        return {
            "profile": name,
            "accepted": True,
            "in_progress": True,
            "switch": self.progress(),
            "serving": engine.status_document(),
        }

    def _run(self, name: str, actor: str, stop_foreign: bool) -> None:
        engine = self._engine
        try:
            status = engine.supervisor.stop(f"switching to profile {name}", wait=True)
            if status.state is not ServingState.STOPPED:
                reason = status.reason or "the engine would not stop"
                self._set(phase="failed", message=reason, ended_at=_now())
                log.warning("switch to %s abandoned: %s", name, reason)
                return
            engine.activate(name, actor)
            self._set(phase="starting")
            engine.start(actor, stop_foreign=stop_foreign)
            self._set(phase="done", ended_at=_now())
        except StartRefused as exc:
            error = engine.refused("serve", exc, actor)
            refusals = [r.as_dict() for r in exc.refusals]
            self._set(phase="refused", message=error.message, refusals=refusals, ended_at=_now())
        except TimeoutError:  # the supervisor is busy: the start is queued, not refused
            self._set(phase="done", message="the start is still in progress", ended_at=_now())
        except (Refused, SupervisorClosed) as exc:
            self._set(phase="failed", message=str(exc) or type(exc).__name__, ended_at=_now())
        except Exception as exc:  # the progress must end, whatever happened
            log.exception("switch to %s failed", name)
            self._set(phase="failed", message=str(exc), ended_at=_now())

    def profiles_document(self) -> dict[str, Any]:
        """``GET /api/v1/serving/profiles``: each profile, the one in force, lint verdicts."""
        engine = self._engine
        cards = rig_cards(self._monitor, self._rig)
        rows = []
        for name in engine.profiles.names:
            profile = engine.profiles.get(name)
            recipe = profile.recipe
            findings = lint_recipe(recipe, host_checks=False, cards=cards)
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
