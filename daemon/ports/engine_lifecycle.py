"""The engine at fleetd's own start and exit, each asked of recovery like any other move.

At start: after a reboot the whole bring-up (``daemon.ports.bringup``), else autostart's
decision through the start path (``Trigger.AUTOSTART``), logged when it says no. At exit:
the engine outlives fleetd unless ``[serving] stop_on_exit``, when recovery's stop path
stops it cleanly (``Trigger.SHUTDOWN``); a stop that fails is said and the exit goes on.
"""

from __future__ import annotations

import logging

from daemon.engine.fleet import SideEngines
from daemon.ports.bringup import BringUp
from recovery.controller import RecoveryController
from recovery.facts import Trigger

log = logging.getLogger("fleetd")


def autostart(
    bring_up: BringUp,
    recovery: RecoveryController,
    boot_id: str,
    *,
    rebooted: bool,
    has_engine: bool,
) -> None:
    """After a reboot the whole bring-up; else autostart's decision (logged when no)."""
    if rebooted:
        bring_up.run(boot_id)
        return
    answer = recovery.request_start(Trigger.AUTOSTART, actor="fleetd")
    if has_engine and not answer.started:
        log.warning("not autostarting the engine: %s", answer.why_not)


def stop_engine_on_exit(
    recovery: RecoveryController, *, stop_on_exit: bool, sides: SideEngines | None = None
) -> None:
    """``[serving] stop_on_exit``: recovery stops the engines cleanly before fleetd exits.

    The side engines (``[serving] run``'s others) first, each by its own controller.
    """
    if not stop_on_exit:
        return  # the engine outlives fleetd
    if sides is not None:
        sides.stop_all(Trigger.SHUTDOWN, "fleetd")
    try:
        answer = recovery.request_stop(Trigger.SHUTDOWN, "fleetd")
    except Exception as exc:  # the exit goes on; the engine is left as it is, said so
        log.error("the engine could not be stopped on exit: %s", exc)
        return
    if not answer.stopped:
        log.warning("the engine did not stop on exit: %s", answer.why_not)
