"""The ``/api/v1/sim/*`` endpoints' side: fault injection into the simulated rig.

Injected Xids are written into the simulated kernel log as real NVRM lines; the daemon
then finds them through its normal follower, exactly as on a real rig.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from hwcheck.sim.rig import SimulatedRig, SimulationError
from hwcheck.sim.scenario import ScenarioError
from hwcheck.sim.state import SimStateError
from recovery.facts import Trigger
from recovery.stops import StopAnswer
from serving.errors import InvalidInput, NotFound, Unavailable

log = logging.getLogger("fleetd.sim")


class SimControl:
    """Adapts ``SimulatedRig`` to the web layer's ``SimulationControl`` protocol."""

    def __init__(self, rig: SimulatedRig, reboot: Callable[[], str]) -> None:
        self._rig = rig
        self._reboot = reboot

    def _card_count(self) -> int:
        return len(self._rig.scenario.cards)

    def _check_card(self, index: int) -> None:
        if not 0 <= index < self._card_count():
            raise NotFound(f"no card {index}: this rig has cards 0..{self._card_count() - 1}")

    def inject_xid(self, card: int, xid: int, message: str | None) -> dict[str, Any]:
        """Write the Xid line; return where it went."""
        self._check_card(card)
        try:
            seq = self._rig.inject_xid(card, xid, message)
        except SimulationError as exc:
            raise InvalidInput(str(exc)) from None
        except OSError as exc:  # the simulated kernel log lives in the state dir (read-only?)
            raise Unavailable(
                f"the simulated kernel log cannot be written: {exc.strerror or exc}"
            ) from None
        return {"card": card, "xid": xid, "seq": seq, "boot_id": self._rig.boot_id()}

    def set_card(self, index: int, fields: dict[str, Any]) -> dict[str, Any]:
        """Change readings of one card (``lost``, ``memory_total_mib``, ...)."""
        self._check_card(index)
        for name, value in fields.items():
            # JSON's 1e400 parses to infinity, which no reading is and no document can carry.
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"{name}: not a finite number")
        try:
            self._rig.set_card(index, **fields)
        except (ScenarioError, TypeError, ValueError) as exc:
            raise InvalidInput(str(exc)) from None
        return {"card": index, "changed": sorted(fields)}

    def reboot(self) -> dict[str, Any]:
        """New boot id, caps back at default, fresh kernel log, timeline restarts."""
        try:
            return {"boot_id": self._reboot()}
        except SimulationError as exc:  # the simulated host's disk is read-only
            raise Unavailable(str(exc)) from None


class RebootedEngine(Protocol):
    """The engine as a simulated reboot ends it (``daemon.engine.service.EngineService``)."""

    @property
    def runs_simulated_engine(self) -> bool:
        """True when the recipe runs the simulated engine, not a real one."""
        ...

    def engine_pids(self) -> set[int]:
        """The engine's process tree."""
        ...


class HostRecovery(Protocol):
    """Recovery's controller as the simulated host's reboot tells it (``RecoveryController``)."""

    def begin_host_reboot(self) -> None:
        """The host is going down: an engine that ends now is no crash to restart."""
        ...

    def end_host_reboot(self) -> None:
        """The reboot failed before the host went down."""
        ...

    def request_stop(self, trigger: Trigger, actor: str, reason: str = "") -> StopAnswer:
        """Recovery's one stop path."""
        ...


REAL_ENGINE_STOP_REASON = "the simulated host reboots: a real engine is stopped cleanly"


def end_as_a_reboot_does(engine: RebootedEngine, recovery: HostRecovery) -> None:
    """End the engine the way a host reboot ends every process, where that is safe.

    The simulated engine is SIGKILLed: that stands for the power going away, not for a
    move fleetd makes on a real engine. A real engine (a config naming its own recipe
    under ``--simulate``) holds real CUDA contexts, which a SIGKILL strands until the real
    host reboots (recovery rule 2): recovery stops it cleanly instead (its stop path,
    recorded like any stop), and one that will not stop is left running and said so.
    """
    if not engine.runs_simulated_engine:
        answer = recovery.request_stop(Trigger.HOST_REBOOT, "sim", REAL_ENGINE_STOP_REASON)
        if not answer.stopped:
            log.warning(
                "the engine is not the simulated one and did not stop (%s): it keeps "
                "running through the simulated reboot, never killed",
                answer.why_not,
            )
        return
    for pid in engine.engine_pids():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class _Follower(Protocol):
    def start(self) -> object: ...
    def stop(self) -> None: ...


def reboot_simulated_host(
    sim: SimulatedRig,
    recovery: HostRecovery,
    engine: RebootedEngine | None,
    poll_lock: AbstractContextManager[Any],
    follower: _Follower,
    begin_boot: Callable[[str], None],
) -> str:
    """The simulated host's reboot; the new boot id.

    A reboot ends every process: the simulated engine is ended first, a real one stopped
    cleanly (recovery is told the host is rebooting, so its exit is no crash to restart).
    The follower is stopped so no record of the new boot is read under the old boot id; the
    new boot is then begun at once (``begin_boot``), not at the next poll.
    """
    sim.check_can_reboot()  # a read-only state dir: refused, nothing ended
    recovery.begin_host_reboot()
    if engine is not None:
        end_as_a_reboot_does(engine, recovery)
    with poll_lock:
        follower.stop()
        try:
            boot_id = sim.reboot()
        except (SimStateError, OSError) as exc:  # the disk failed mid-way: the old boot stays
            recovery.end_host_reboot()
            follower.start()
            raise SimulationError(f"the simulated reboot failed: {exc}") from None
        begin_boot(boot_id)
    return boot_id


def simulated_host_cannot_reboot(sim: SimulatedRig | None) -> str | None:
    """Why the simulated host cannot reboot now (read-only state dir), else None."""
    try:
        if sim is not None:
            sim.check_can_reboot()
    except SimulationError as exc:
        return str(exc)
    return None
