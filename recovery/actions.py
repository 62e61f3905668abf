"""Recovery's audit actions and refusal codes: the names that cross into the daemon's wings.

Every recovery record carries an ``Action`` (the audit row's ``action``, the event's
``details.action``) and, for a refusal or a start with warnings, the reasons'
``RefusalCode``s (``details.codes``). The daemon's wings read them back: the status shows
recovery's last decisions, the audit port picks each record's severity, the alert rules
leave out what alerts on its own. Each of those facts is one row here (``ACTIONS``,
``REFUSALS``), so a new action or code is one member plus its row, and the tests fail on
a member without one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hwcheck.model import Severity


class Action(enum.StrEnum):
    """What recovery recorded (the audit trail's ``action``)."""

    STOP_AND_LATCH = "stop_and_latch"
    STOP_AND_HOLD = "stop_and_hold"  # a failing canary round, on_fail = "hold" or the breaker
    RESTART_AFTER = "restart_after"
    START = "start"
    STOP = "stop"
    HOLD = "hold"
    REFUSE = "refuse"
    ADVISE_INSPECTION = "advise_inspection"
    NONE = "none"
    REBOOT = "reboot"
    POWER_CYCLE = "power_cycle"
    CLEAR_LATCH = "clear_latch"
    BRING_UP = "bring_up"
    PROBE = "probe"
    DRAIN = "drain"  # before a confirmed reboot: load balancers move traffic away


@dataclass(frozen=True, slots=True)
class ActionRow:
    """How the daemon's wings treat one action's records.

    ``severity``: the event's, whatever the result (None: a warning when the record carries
    warnings, else info). ``in_status``: shown as one of recovery's last decisions.
    ``own_alert``: its effect raises its own alert (the latch, the breaker, the backoff),
    so the recovery event adds none unless it was a dry run.
    """

    severity: Severity | None
    in_status: bool
    own_alert: bool


_ACTIONS = {
    Action.STOP_AND_LATCH: ActionRow(Severity.CRITICAL, in_status=True, own_alert=True),
    Action.STOP_AND_HOLD: ActionRow(None, in_status=True, own_alert=False),
    Action.RESTART_AFTER: ActionRow(Severity.WARNING, in_status=True, own_alert=True),
    Action.START: ActionRow(None, in_status=True, own_alert=False),
    Action.STOP: ActionRow(None, in_status=True, own_alert=False),
    Action.HOLD: ActionRow(Severity.CRITICAL, in_status=True, own_alert=True),
    Action.REFUSE: ActionRow(Severity.WARNING, in_status=True, own_alert=False),
    Action.ADVISE_INSPECTION: ActionRow(Severity.WARNING, in_status=True, own_alert=False),
    Action.NONE: ActionRow(None, in_status=True, own_alert=False),
    Action.REBOOT: ActionRow(None, in_status=True, own_alert=False),
    Action.POWER_CYCLE: ActionRow(None, in_status=True, own_alert=False),
    Action.CLEAR_LATCH: ActionRow(None, in_status=True, own_alert=False),
    Action.BRING_UP: ActionRow(None, in_status=True, own_alert=False),
    Action.PROBE: ActionRow(None, in_status=True, own_alert=False),
    Action.DRAIN: ActionRow(None, in_status=True, own_alert=False),
}
ACTIONS: Mapping[Action, ActionRow] = MappingProxyType(_ACTIONS)
# Derived views, for the wings that read one column.
SHOWN_IN_STATUS = frozenset(action for action, row in ACTIONS.items() if row.in_status)
OWN_ALERT = frozenset(action for action, row in ACTIONS.items() if row.own_alert)


def severity_of(action: str, warned: bool) -> Severity:
    """The event's severity for a record of ``action`` (an unknown name: by ``warned``)."""
    try:
        row = ACTIONS[Action(action)]
    except ValueError:
        row = None
    if row is not None and row.severity is not None:
        return row.severity
    return Severity.WARNING if warned else Severity.INFO


class RefusalCode(enum.StrEnum):
    """A reason's stable code (``Reason.code``): why a start was refused, or warned.

    Recovery coins the gate's and the reboot's, the engine wing's preflight and
    foreign-container stop coin theirs with these members; the supervisor's mechanics
    (``serving.runtime``, below recovery) coin theirs as plain strings, listed here too so
    the alert rules compare members, not strings.
    """

    REBOOT_LATCH = "reboot_latch"
    CARDS_BUSY = "cards_busy"
    LINT = "lint"
    CRITICAL_CHECK = "critical_check"
    WARNING_CHECK = "warning_check"
    PORT_IN_USE = "port_in_use"
    GPUS_HELD = "gpus_held"
    FOREIGN_GPU_PROCESSES = "foreign_gpu_processes"
    FOREIGN_NOT_STOPPED = "foreign_not_stopped"
    ENGINE_DRIFT = "engine_drift"  # the running engine is not the profile in force
    REBOOT_COMMAND = "reboot_command"
    COLD_ADVISED = "cold_advised"
    CHECKPOINT = "checkpoint"
    BOOT_ENTRY = "boot_entry"
    REBOOT_REFUSED = "reboot_refused"
    # The supervisor's mechanics (serving.runtime.states.Refusal).
    ENGINE_SURVIVORS = "engine_survivors"
    STOPPING = "stopping"
    STOP_STUCK = "stop_stuck"
    RECIPE = "recipe"
    LAUNCH_FAILED = "launch_failed"
    SUPERSEDED = "superseded"
    PREFLIGHT_ERROR = "preflight_error"


@dataclass(frozen=True, slots=True)
class RefusalRow:
    """How the alert rules treat one code.

    ``own_alert``: the cause alerts on its own (a check's alert, ``ForeignGpuProcess``,
    ``RebootRequired``), so a start refused or warned for it alone adds no alert.
    """

    own_alert: bool


_REFUSALS = {
    RefusalCode.REBOOT_LATCH: RefusalRow(own_alert=True),
    RefusalCode.CARDS_BUSY: RefusalRow(own_alert=False),
    RefusalCode.LINT: RefusalRow(own_alert=False),
    RefusalCode.CRITICAL_CHECK: RefusalRow(own_alert=True),
    RefusalCode.WARNING_CHECK: RefusalRow(own_alert=True),
    RefusalCode.PORT_IN_USE: RefusalRow(own_alert=False),
    RefusalCode.GPUS_HELD: RefusalRow(own_alert=True),
    RefusalCode.FOREIGN_GPU_PROCESSES: RefusalRow(own_alert=True),
    RefusalCode.FOREIGN_NOT_STOPPED: RefusalRow(own_alert=False),
    RefusalCode.ENGINE_DRIFT: RefusalRow(own_alert=False),
    RefusalCode.REBOOT_COMMAND: RefusalRow(own_alert=False),
    RefusalCode.BOOT_ENTRY: RefusalRow(own_alert=False),
    RefusalCode.COLD_ADVISED: RefusalRow(own_alert=False),
    RefusalCode.CHECKPOINT: RefusalRow(own_alert=False),
    RefusalCode.REBOOT_REFUSED: RefusalRow(own_alert=False),
    RefusalCode.ENGINE_SURVIVORS: RefusalRow(own_alert=False),
    RefusalCode.STOPPING: RefusalRow(own_alert=False),
    RefusalCode.STOP_STUCK: RefusalRow(own_alert=False),
    RefusalCode.RECIPE: RefusalRow(own_alert=False),
    RefusalCode.LAUNCH_FAILED: RefusalRow(own_alert=False),
    RefusalCode.SUPERSEDED: RefusalRow(own_alert=False),
    RefusalCode.PREFLIGHT_ERROR: RefusalRow(own_alert=False),
}
REFUSALS: Mapping[RefusalCode, RefusalRow] = MappingProxyType(_REFUSALS)


def refusal_code(code: str) -> RefusalCode | None:
    """The member for a recorded code (None: a code this build does not know)."""
    try:
        return RefusalCode(code)
    except ValueError:
        return None
