"""What a check is, declared once in its own module: ``SPEC = CheckSpec(...)``.

Each check module (``hwcheck/checks/<id>.py``) exports one spec: its id and function, the
explanation ``fleetctl explain`` prints, its alert's name and title, the tag a card row
shows, the checks a critical result of it explains, and whether it gates a start by
default. The registry, the explanations (``hwcheck.check_texts``), the cause grouping
(``hwcheck.causes``), the alert rules (``daemon.alerts.rules``), the start gate's
defaults (``recovery.settings``) and the dashboard (``GET /api/v1/checks``: which checks
its Host panel judges, where it draws a check's severity) read the specs, so a new check is
one new module (and its line in the registry's order).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hwcheck.checks.base import Check


@dataclass(frozen=True, slots=True)
class CheckText:
    """One check's explanation: its short name, what it means here, the remedy."""

    title: str
    meaning: str
    remedy: str

    @property
    def text(self) -> str:
        """The meaning and the remedy as one paragraph."""
        return f"{self.meaning} What to do: {self.remedy}"


@dataclass(frozen=True, slots=True)
class Alert:
    """A check's alert: its ``alertname`` and the noun its summary starts with.

    The summary adds " on card N", so the title is never a phrase ending in "on".
    """

    name: str
    title: str


class DrawnAt(StrEnum):
    """The one place of the dashboard that shows a check's severity beside its reading.

    The dashboard keeps no check ids: it asks ``GET /api/v1/checks`` which check each place
    shows. A new member needs its place in ``web/dashboard`` (a test ties the two).
    """

    CARD_VRAM = "card_vram"  # a tile's UNLOCKED/LOCKED badge
    CARD_BRAKE = "card_brake"  # a tile's brake badge and its SM clock
    CARD_LOST = "card_lost_badge"  # a tile's LOST badge
    CARD_POWER = "card_power"  # a tile's power draw against its cap
    CARD_TEMPERATURE = "card_temperature"  # a tile's temperature
    CARD_PCIE = "card_pcie"  # a tile's PCIe link
    CARD_XIDS = "card_xids"  # a tile's Xid count since boot
    HOST_KERNEL = "host_running_kernel"  # the Host panel's running kernel
    HOST_MODULE = "host_module"  # the Host panel's nvidia module
    HOST_P2P = "host_p2p"  # the Host panel's P2P pairs
    MEMORY_MAP = "memory_map"  # the failed memory test's block map


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """One check, everything the other wings key by its id.

    ``alert``: None when the check alerts through its own events instead (the Xids per
    Xid, the engine's output per canary). ``tag``: the short word of a card row (None:
    the id in capitals). ``explains``: the failing checks a critical result of this one
    explains (they are grouped under it). ``gate``: a critical result refuses a start by
    default (``[recovery] gate_checks``). ``host_panel``: drawn in the dashboard's Host
    panel. ``drawn_at``: the dashboard's place that shows its severity (None: only the
    failed checks' list).
    """

    id: str
    run: Check
    text: CheckText
    alert: Alert | None
    tag: str | None = None
    explains: frozenset[str] = frozenset()
    gate: bool = False
    host_panel: bool = False
    drawn_at: DrawnAt | None = None

    @property
    def title(self) -> str:
        """The check's short name (``fleetctl explain``)."""
        return self.text.title

    @property
    def meaning(self) -> str:
        """What it means on these rigs."""
        return self.text.meaning

    @property
    def remedy(self) -> str:
        """What to do about it."""
        return self.text.remedy
