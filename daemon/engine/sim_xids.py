"""Under ``--simulate``: the simulated engine's faults reach the simulated rig's cards.

A real worker that dies of an illegal memory access leaves an Xid 31 on its card; the
simulated engine cannot write the simulated rig's kernel log (another process), so it
prints ``[cmpfleet-sim] Xid N on PP rank R`` (``serving.sim.crash_depth``) and this
follower writes that Xid on rank R's card (the profile's cards in rank order), a moment
before the engine exits, as on a real rig. It also keeps ``sim-cards.json`` (each card's
memory as the simulated rig reports it) for the engine's KV pool line at its next ready:
a card made to report less memory at a boot gives a smaller pool.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from daemon.engine.service import EngineService
from hwcheck.atomic import atomic_write
from hwcheck.model import RigSnapshot
from hwcheck.sim.rig import SimulatedRig
from hwcheck.threads import CrashReport, ServiceThread, Wake
from serving.sim.crash_depth import XID_MARK

LOG = logging.getLogger("fleetd.sim")


class SimulatedFaults:
    """The follower of the engine's log for Xid marks, and the cards file's keeper."""

    def __init__(
        self,
        sim: SimulatedRig,
        engine: EngineService,
        cards_file: Path,
        on_crash: CrashReport | None = None,
    ) -> None:
        self._sim = sim
        self._engine = engine
        self._cards_file = cards_file
        self._written: str | None = None
        self._thread = ServiceThread("sim-xids", self._follow, on_crash=on_crash, log=LOG)

    def start(self) -> None:
        """Follow the engine's log from now on."""
        self._thread.start()

    def stop(self) -> None:
        """Stop following."""
        self._thread.stop(2.0)

    def _follow(self, wake: Wake) -> None:
        with self._engine.supervisor.log_capture.subscribe() as lines:
            while not wake.stopping:
                line = lines.get(timeout_s=0.2)
                if line is not None:
                    self.take(line)

    def take(self, line: str) -> int | None:
        """Write the Xid a mark asks for on its rank's card; the card, or None."""
        match = XID_MARK.search(line)
        if match is None:
            return None
        xid, rank = int(match.group(1)), int(match.group(2))
        cards = self._engine.profile_cards()
        if rank >= len(cards):
            LOG.warning("simulated Xid %d on PP rank %d: the profile has no such rank", xid, rank)
            return None
        card = cards[rank]
        try:
            self._sim.inject_xid(card, xid, pid=self._engine.supervisor.status().pid)
        except Exception as exc:
            LOG.warning("simulated Xid %d on card %d not written: %s", xid, card, exc)
            return None
        return card

    def on_snapshot(self, snapshot: RigSnapshot) -> None:
        """Keep ``sim-cards.json`` as the simulated cards report their memory."""
        doc = json.dumps(
            {
                "cards": [
                    {"index": card.index, "memory_total_mib": card.memory_total_mib}
                    for card in snapshot.cards
                    if card.memory_total_mib is not None
                ]
            },
            sort_keys=True,
        )
        if doc == self._written:
            return
        with contextlib.suppress(OSError):
            atomic_write(self._cards_file, doc + "\n")
            self._written = doc


def faults_for(
    sim: SimulatedRig | None,
    engine: EngineService | None,
    cards_file: Path,
    on_crash: CrashReport | None,
) -> SimulatedFaults | None:
    """The simulation's faults for a simulated rig with an engine (None otherwise)."""
    if sim is None or engine is None:
        return None
    return SimulatedFaults(sim, engine, cards_file, on_crash)
