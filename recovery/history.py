"""Each card's hardware faults across boots, and how the host was rebooted between them.

The escalation rule needs memory a boot cannot give: "card 1 had an Xid 31 before the
last (warm) reboot, and has one again" means the warm reboot did not help and the card
needs a cold power cycle (the seeds: about 1 in 10 engine starts on one rig). This keeps
the faults (card, boot, what, when) and the boots in order, with whether each began
after a confirmed cold power cycle, in one small JSON document the daemon persists
(``DocumentStore``); ``past_faults`` is what the policy reads. Bounded: the last
``MAX_BOOTS`` boots and ``MAX_FAULTS`` faults.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from recovery.facts import PastFault
from recovery.ports import DocumentStore

LOG = logging.getLogger("recovery.history")
MAX_BOOTS = 20
MAX_FAULTS = 200


class FaultHistory:
    """Per-card faults over the last boots (thread-safe; saved at every change)."""

    def __init__(self, store: DocumentStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._boots: list[dict[str, Any]] = []
        self._faults: list[dict[str, Any]] = []
        self._pending_reboot: str | None = None
        self._load()

    def _load(self) -> None:
        try:
            document = self._store.load() or {}
        except Exception:  # a history that cannot be read costs the escalation, nothing else
            LOG.exception("the card fault history could not be read: starting a new one")
            document = {}
        boots = document.get("boots")
        faults = document.get("faults")
        self._boots = [b for b in boots if isinstance(b, dict)] if isinstance(boots, list) else []
        self._faults = (
            [f for f in faults if isinstance(f, dict)] if isinstance(faults, list) else []
        )
        pending = document.get("pending_reboot")
        self._pending_reboot = pending if pending in ("warm", "cold") else None

    def _save(self) -> None:
        document = {
            "boots": self._boots[-MAX_BOOTS:],
            "faults": self._faults[-MAX_FAULTS:],
            "pending_reboot": self._pending_reboot,
        }
        try:
            self._store.save(document)
        except Exception:
            LOG.exception("the card fault history could not be saved")

    @property
    def boot_id(self) -> str | None:
        """The boot now (the last one seen)."""
        with self._lock:
            return str(self._boots[-1]["boot_id"]) if self._boots else None

    def new_boot(self, boot_id: str, at: str) -> None:
        """A boot began (or fleetd started in one): remember it and how the host rebooted."""
        with self._lock:
            if self._boots and self._boots[-1].get("boot_id") == boot_id:
                return
            how = self._pending_reboot if self._boots else None
            self._boots.append({"boot_id": boot_id, "at": at, "after": how})
            self._boots = self._boots[-MAX_BOOTS:]
            self._pending_reboot = None
            self._save()

    def note_reboot(self, cold: bool) -> None:
        """A confirmed reboot (``cold``: a power cycle) is about to run."""
        with self._lock:
            self._pending_reboot = "cold" if cold else "warm"
            self._save()

    def record(self, card: int, what: str, at: str) -> None:
        """A hardware fault on ``card`` this boot (once per card and kind of fault)."""
        with self._lock:
            if not self._boots:
                return
            boot_id = self._boots[-1]["boot_id"]
            entry = {"card": card, "boot_id": boot_id, "what": what, "at": at}
            if any(
                (f.get("card"), f.get("boot_id"), f.get("what")) == (card, boot_id, what)
                for f in self._faults
            ):
                return
            self._faults.append(entry)
            self._faults = self._faults[-MAX_FAULTS:]
            self._save()

    def past_faults(self) -> tuple[PastFault, ...]:
        """The faults of earlier boots, each with how many reboots ago and how they went."""
        with self._lock:
            order = {str(boot.get("boot_id")): n for n, boot in enumerate(self._boots)}
            now = len(self._boots) - 1
            found = []
            for fault in self._faults:
                index = order.get(str(fault.get("boot_id")))
                card = fault.get("card")
                if index is None or index >= now or not isinstance(card, int):
                    continue
                later = self._boots[index + 1 :]
                cold = sum(1 for boot in later if boot.get("after") == "cold")
                found.append(
                    PastFault(
                        card=card,
                        boots_ago=now - index,
                        what=str(fault.get("what", "a hardware fault")),
                        at=str(fault.get("at", "?")),
                        rebooted_at=str(later[0].get("at", "")) if later else "",
                        power_cycled=cold > 0,
                        warm_reboots=len(later) - cold,
                        cold_cycles=cold,
                    )
                )
            return tuple(found)
