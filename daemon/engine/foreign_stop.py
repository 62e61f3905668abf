"""``--stop-foreign``: stop the foreign containers that hold what a start needs, on record.

Each container gets SIGINT, then SIGTERM through its runtime's ``kill --signal``, each
with ``[serving] stop_foreign_timeout_s`` of grace; never ``stop --time`` (which ends in
SIGKILL), ``kill -9`` or ``rm -f``. One that outlives both is left running and the start
is refused, naming it and what was sent (``unstopped_refusal``). Each stop is an
``operator`` event and an audit row, whether it took or not. A drifted engine's container
(fleetd's container name, another recipe) holds the port, so it is stopped with them.
Foreign bare processes are not here: they are named in the refusal, never signalled.
"""

from __future__ import annotations

from typing import Any

from daemon.store import Store
from hwcheck.model import EventKind, Severity
from recovery.actions import RefusalCode
from recovery.decisions import Reason
from serving.runtime.foreign import ContainerProbe, ContainerRef, StopOutcome
from serving.runtime.states import Drift

CONTAINER_MODES = ("docker", "podman")


def outcome_dict(outcome: StopOutcome) -> dict[str, Any]:
    """The JSON form of one stop (the API's ``stopped_foreign`` entries, event details)."""
    ref = outcome.container
    return {
        "runtime": ref.runtime,
        "container": ref.name,
        "image": ref.image,
        "commands": [list(command) for command in outcome.commands],
        "stopped": outcome.stopped,
        "detail": outcome.detail,
    }


def commands_text(outcome: StopOutcome) -> str:
    """The commands sent, as a person would type them: ``docker kill --signal SIGINT x; ...``."""
    return "; ".join(" ".join(command) for command in outcome.commands)


def unstopped_refusal(stopped: list[dict[str, Any]]) -> Reason | None:
    """Why a start cannot go on: a foreign container that would not stop (None: all did)."""
    left = [entry for entry in stopped if not entry["stopped"]]
    if not left:
        return None
    named = "; ".join(
        f"container {entry['container']} (image {entry['image']}, {entry['runtime']}) "
        f"was sent {' then '.join(c[3] for c in entry['commands'] if len(c) > 3)}: "
        f"{entry['detail']}"
        for entry in left
    )
    return Reason(
        RefusalCode.FOREIGN_NOT_STOPPED,
        f"foreign container not stopped: {named}",
        "stop it yourself (its own way out, or a reboot); fleetd never kills it",
    )


def _record(store: Store, outcome: StopOutcome, actor: str) -> None:
    ref = outcome.container
    done = "stopped" if outcome.stopped else "could not stop"
    message = (
        f"{done} foreign container {ref.name} (image {ref.image}): {commands_text(outcome)}"
        + (f": {outcome.detail}" if outcome.detail else "")
    )
    severity = Severity.INFO if outcome.stopped else Severity.WARNING
    store.record_event(EventKind.OPERATOR, severity, message, details=outcome_dict(outcome))
    store.audit(
        actor,
        "stop_foreign",
        "done" if outcome.stopped else "failed",
        target=ref.name,
        reason=message,
    )


def _drifted_container(drift: Drift | None) -> ContainerRef | None:
    if drift is None or not drift.container_name or drift.mode not in CONTAINER_MODES:
        return None
    name = drift.container_name
    return ContainerRef(drift.mode, name, name, "not the active profile's")


def stop_foreign_containers(
    containers: list[ContainerRef],
    drift: Drift | None,
    probe: ContainerProbe,
    grace_s: float,
    store: Store,
    actor: str,
) -> list[dict[str, Any]]:
    """Stop ``containers`` (and a drifted engine's container); what happened to each."""
    targets = list(containers)
    drifted = _drifted_container(drift)
    if drifted is not None and all(ref.name != drifted.name for ref in targets):
        targets.append(drifted)
    outcomes = [probe.stop(ref, grace_s) for ref in targets]
    for outcome in outcomes:
        _record(store, outcome, actor)
    return [outcome_dict(outcome) for outcome in outcomes]
