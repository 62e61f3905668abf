"""A card's passport: everything this rig knows of one card, by serial, across slots and boots.

Used CMP 170HX cards change hands with a VBIOS (250 W stock or 300 W OC), an unlock and a
history nobody wrote down (tim-odonnell keeps a ``CARD-REGISTRY.md`` per serial by hand;
docs/domain.md). The passport gathers it: the card's identity and what NVML reads of it
now (board, VBIOS and its power range, memory and unlock, link, cap), every slot it has
sat in, every diagnostic run that tested it (memory test, link, compute) with its
verdict, the Xids attributed to it, and the caps and tok/W of every bench run it was in
(``daemon.rig.passport_bench``). It follows the card's UUID, so a card moved to
another slot keeps its history; a card seen for the first time says so.

A card can be taken **out of service** (``fleetctl card NAME --out-of-service REASON``):
it stays in the status, tagged with the reason, but its checks stop paging and stop
gating any profile's start (its results are judged, then shown as ``ok`` with the mark),
so a card benched out of the profile no longer holds the rig CRITICAL nor repeats a
page every few hours. The mark follows the UUID and survives restarts and reboots.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from daemon.rig.monitor import RigMonitor
from daemon.rig.passport_bench import card_bench
from daemon.store import Store
from hwcheck.checks.vram_unlocked import CHECK_ID as VRAM_CHECK
from hwcheck.model import CheckResult, EventKind, GpuSnapshot, Severity
from serving.errors import InvalidInput, NotFound

MAX_REASON_CHARS = 200
BENCH_RUNS_READ = 100  # the newest bench runs searched for the card's (10 shown)


def bench_results(
    results: Sequence[CheckResult], cards: Sequence[GpuSnapshot], marks: Mapping[str, str]
) -> list[CheckResult]:
    """``results`` with every out-of-service card's finding shown, never paged nor gating.

    ``marks``: UUID -> reason. A finding of such a card keeps its words behind the mark
    (``out of service (RMA pending): card 3: ...``) at severity ``ok``.
    """
    if not marks:
        return list(results)
    benched = {card.index: marks[card.uuid] for card in cards if card.uuid in marks}
    out: list[CheckResult] = []
    for result in results:
        reason = None if result.card is None else benched.get(result.card)
        if reason is None or result.severity is Severity.OK:
            out.append(result)
            continue
        out.append(
            dataclasses.replace(
                result,
                severity=Severity.OK,
                message=f"out of service ({reason}): {result.message}",
                remedy="",
            )
        )
    return out


class Passports:
    """Finds cards by name, assembles their passports, and keeps the out-of-service marks."""

    def __init__(
        self, store: Store, monitor: RigMonitor, rejudge: Callable[[], None] = lambda: None
    ) -> None:
        self._store = store
        self._monitor = monitor
        self._rejudge = rejudge
        self._lock = threading.Lock()
        self._marks = {uuid: str(m.get("reason", "")) for uuid, m in store.out_of_service().items()}

    def marks(self) -> dict[str, str]:
        """UUID -> reason of the cards out of service (in memory: read at every poll)."""
        with self._lock:
            return dict(self._marks)

    def _live(self) -> dict[str, GpuSnapshot]:
        latest = self._monitor.view().latest
        return {} if latest is None else {card.uuid: card for card in latest.cards}

    def find(self, name: str) -> dict[str, Any]:
        """The ``cards`` row ``name`` means: an index (of the cards now), serial, UUID or address."""
        wanted = name.strip()
        known = self._store.known_cards()
        live = self._live()
        if wanted.isdecimal():
            for card in live.values():
                if card.index == int(wanted):
                    for row in known:
                        if row["uuid"] == card.uuid:
                            return row
        lowered = wanted.lower()
        for row in known:
            if lowered in {
                str(row["serial"] or "").lower(),
                row["uuid"].lower(),
                row["pci_bus_id"].lower(),
            }:
                return row
        matches = [row for row in known if row["uuid"].lower().startswith(lowered)]
        if len(lowered) >= 8 and len(matches) == 1:
            return matches[0]
        names = ", ".join(
            f"{row['index']} ({row['serial'] or row['uuid'][:12]})" for row in known[:8]
        )
        raise NotFound(
            f"no card {name!r} on this rig: give an index, a serial, a UUID or a PCI address "
            f"(known: {names or 'none yet'})",
            "no_such_card",
        )

    def passport(self, name: str) -> dict[str, Any]:
        """The passport of card ``name`` (see the module's docstring)."""
        row = self.find(name)
        uuid = row["uuid"]
        live = self._live().get(uuid)
        events = self._store.card_events(uuid)
        slots = self._slots(row, events)
        document: dict[str, Any] = {
            **row,
            "present": live is not None,
            "first_time": row["first_seen"] == row["last_seen"] and len(slots) <= 1,
            "now": None if live is None else self._now(live),
            "slots": slots,
            "diags": self._diags(uuid, slots, events),
            "xids": [
                {"ts": e.ts.isoformat(), "xid": e.xid, "message": e.message}
                for e in events
                if e.kind is EventKind.XID and e.card_uuid == uuid
            ],
            "crashes": self._crashes(row, slots, events),
            "bench": card_bench(self._store.list_bench_runs(BENCH_RUNS_READ), uuid),
            "out_of_service": self._store.out_of_service().get(uuid),
        }
        return document

    def _now(self, card: GpuSnapshot) -> dict[str, Any]:
        results = [
            r for r in self._monitor.view().results if r.card == card.index and r.id == VRAM_CHECK
        ]
        unlock = "unknown"
        if results:
            unlock = "unlocked" if results[0].severity is Severity.OK else results[0].message
        return {
            "index": card.index,
            "pci_bus_id": card.pci_bus_id,
            "board_id": None if card.pci_device_id is None else f"10de:{card.pci_device_id:04x}",
            "vbios_version": card.vbios_version,
            "memory_total_mib": card.memory_total_mib,
            "unlock": unlock,
            "power_limit_w": card.power_limit_w,
            "power_min_limit_w": card.power_min_limit_w,
            "power_default_limit_w": card.power_default_limit_w,
            "power_max_limit_w": card.power_max_limit_w,
            "pcie": f"Gen{card.pcie_gen_current} x{card.pcie_width_current}",
            "pcie_max": f"Gen{card.pcie_gen_max} x{card.pcie_width_max}",
        }

    @staticmethod
    def _slots(row: dict[str, Any], events: Sequence[Any]) -> list[dict[str, Any]]:
        """Where the card has sat, oldest first: its first sighting, then each move."""
        slots: list[dict[str, Any]] = []
        for event in sorted(events, key=lambda e: (e.ts, e.id)):
            if event.kind is not EventKind.DAEMON or event.card_uuid != row["uuid"]:
                continue
            sighting = event.message.startswith("new card") or " moved from " in event.message
            if sighting and event.pci_bus_id:
                slots.append(
                    {
                        "since": event.ts.isoformat(),
                        "pci_bus_id": event.pci_bus_id,
                        "index": event.card,
                    }
                )
        if not slots:
            slots.append(
                {"since": row["first_seen"], "pci_bus_id": row["pci_bus_id"], "index": row["index"]}
            )
        return slots

    @staticmethod
    def _diags(
        uuid: str, slots: list[dict[str, Any]], events: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """The diagnostic runs that tested this card, newest first, with its verdict."""

        def address_at(ts: str) -> str | None:
            held = [slot for slot in slots if slot["since"] <= ts] or slots[:1]
            return str(held[-1]["pci_bus_id"])

        runs: list[dict[str, Any]] = []
        for event in events:
            if event.kind is not EventKind.DIAG or not event.details:
                continue
            ts = event.ts.isoformat()
            documents = event.details.get("cards") or event.details.get("memtest") or []
            kind = str(event.details.get("diag") or "memtest")
            for document in documents:
                if not isinstance(document, dict):
                    continue
                mine = document.get("uuid") == uuid or (
                    "uuid" not in document and document.get("pci_bus_id") == address_at(ts)
                )
                if mine:
                    runs.append(
                        {
                            "ts": ts,
                            "kind": kind,
                            "outcome": document.get("outcome"),
                            "verdict": document.get("verdict") or document.get("error") or "",
                        }
                    )
        return runs

    @staticmethod
    def _crashes(
        row: dict[str, Any], slots: list[dict[str, Any]], events: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """The crash black box's verdicts that named this card (by serial, else by its index then)."""
        found: list[dict[str, Any]] = []
        for event in events:
            details = event.details or {}
            if event.kind is not EventKind.CRASH or details.get("evidence") != "bundle":
                continue
            ts = event.ts.isoformat()
            held = [slot for slot in slots if slot["since"] <= ts] or slots[:1]
            serial = details.get("serial")
            mine = (
                serial == row["serial"]
                if serial and row["serial"]
                else details.get("card") is not None and details.get("card") == held[-1]["index"]
            )
            if mine:
                found.append(
                    {
                        "ts": ts,
                        "bundle_id": details.get("bundle_id"),
                        "crash_class": details.get("crash_class"),
                        "verdict": details.get("verdict"),
                        "message": event.message,
                    }
                )
        return found

    def mark(self, name: str, reason: str | None, actor: str) -> dict[str, Any]:
        """Take card ``name`` out of service (``reason``) or back in (None); its passport."""
        if reason is not None:
            reason = " ".join(reason.split())
            if not reason:
                raise InvalidInput(
                    "--out-of-service needs a reason (what is wrong, what next)", "no_reason"
                )
            if len(reason) > MAX_REASON_CHARS or not reason.isprintable():
                raise InvalidInput(
                    f"the reason must be printable text of at most {MAX_REASON_CHARS} characters",
                    "bad_reason",
                )
        row = self.find(name)
        marks = self._store.set_out_of_service(row["uuid"], row["serial"], reason, actor)
        with self._lock:
            self._marks = {uuid: str(m.get("reason", "")) for uuid, m in marks.items()}
        what = f"out of service: {reason}" if reason else "back in service"
        self._store.record_event(
            EventKind.OPERATOR,
            Severity.INFO,
            f"card {row['index']} ({row['serial'] or row['uuid']}) {what} ({actor})",
            row["index"],
            card_uuid=row["uuid"],
            pci_bus_id=row["pci_bus_id"],
        )
        self._rejudge()
        return self.passport(row["uuid"])
