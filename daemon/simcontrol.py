"""The ``/api/v1/sim/*`` endpoints' side: fault injection into the simulated rig.

Injected Xids are written into the simulated kernel log as real NVRM lines; the daemon
then finds them through its normal follower, exactly as on a real rig.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any

from hwcheck.sim.rig import SimulatedRig, SimulationError
from hwcheck.sim.scenario import ScenarioError
from serving.errors import InvalidInput, NotFound


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
        return {"boot_id": self._reboot()}


def end_as_a_reboot_does(pids: Iterable[int]) -> None:
    """End the simulated engine's processes the way a host reboot ends every process.

    Only the simulated reboot calls this: it stands for the power going away, not for a
    move fleetd makes on a real engine (which it never SIGKILLs unless ``allow_kill``).
    """
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
