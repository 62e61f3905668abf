"""What the web layer needs from the daemon, as a protocol (web never imports daemon).

The daemon hands an object satisfying ``WebServices`` to ``create_app``; tests can hand
in the real daemon services or a small stand-in at this boundary. Refusals are raised as
``serving.errors`` classes (``NotFound``, ``Refused``, ...); ``web.errors`` maps them to
status codes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from web.models import EventDocument, RecipeDocument, StatusDocument


@dataclass(frozen=True)
class EventQuery:
    """Filters of ``GET /api/v1/events``: time window, kind, card, acknowledged, severity.

    ``before_id`` is the cursor of the next page (the last id of the page before);
    ``until`` and ``since`` both include their instant.
    """

    since: datetime | None = None
    until: datetime | None = None
    kind: str | None = None
    card: int | None = None
    acked: bool | None = None
    before_id: int | None = None
    limit: int = 100
    min_severity: str | None = None  # this severity or worse (info lists every event)


class SimulationControl(Protocol):
    """Fault injection for ``--simulate`` (absent on a real rig: the routes answer 404)."""

    def inject_xid(self, card: int, xid: int, message: str | None) -> dict[str, Any]:
        """Write a real-format NVRM Xid line into the simulated kernel log."""
        ...

    def set_card(self, index: int, fields: dict[str, Any]) -> dict[str, Any]:
        """Change a simulated card's readings."""
        ...

    def reboot(self) -> dict[str, Any]:
        """Simulate a host reboot."""
        ...


class WebServices(Protocol):
    """Reads and mutations the API exposes."""

    token: str
    loopback_only: bool

    @property
    def sim(self) -> SimulationControl | None:
        """Simulation control, or ``None`` on a real rig."""
        ...

    def status_document(self) -> StatusDocument | dict[str, Any]:
        """The status document (same as ``fleetctl status --json``)."""
        ...

    def list_events(self, query: EventQuery) -> Sequence[EventDocument]:
        """Events newest first; ``InvalidInput`` for an unknown kind or cursor."""
        ...

    def ack_event(self, event_id: int, by: str) -> dict[str, Any]:
        """Acknowledge one event; ``NotFound`` when it does not exist."""
        ...

    def apply_caps(self) -> dict[str, Any]:
        """Re-apply the configured power cap to cards that are off it."""
        ...

    def serving_action(
        self, action: str, stop_foreign: bool = False, engine: str | None = None
    ) -> dict[str, Any]:
        """``start|stop|restart`` the engine; ``Refused``/``Conflict`` with the reason if refused.

        ``stop_foreign`` (start only): stop foreign containers holding the port or the
        profile's cards first. ``engine``: which engine, by its profile (None: the primary;
        ``NotFound`` when no engine serves that profile).
        """
        ...

    def serving_profiles(self) -> dict[str, Any]:
        """The launch profiles, the one in force, and each one's lint verdict."""
        ...

    def serving_switch(self, profile: str, stop_foreign: bool = False) -> dict[str, Any]:
        """Stop the engine cleanly, switch to ``profile``, start it.

        ``NotFound`` for an unknown name (naming the known ones); ``Refused`` when the
        latch or the profile's lint errors refuse it before anything stops.
        """
        ...

    def serving_logs(self, lines: int, engine: str | None = None) -> list[str]:
        """The last ``lines`` lines of the engine's log (``engine``: as ``serving_action``)."""
        ...

    def serving_follow(self, lines: int, engine: str | None = None) -> Iterator[str | None]:
        """The last ``lines`` lines, then new ones as the engine (``engine``: by profile) writes them."""
        ...

    def serving_recipe(self) -> RecipeDocument:
        """The spec the daemon would launch, and its diff to the last ready launch."""
        ...

    def recovery_reboot(
        self, confirm: bool, cold: bool = False, force: bool = False
    ) -> dict[str, Any]:
        """Explain the reboot (no ``confirm``), or stop cleanly then reboot.

        ``cold``: the power cycle (``[recovery] power_cycle_command``) instead. ``Refused``
        when the engine would not stop, the command failed, none is configured, its program
        is not on this host, or (without ``force``) the default boot entry is not the
        baseline kernel (code ``boot_entry``).
        """
        ...

    def recovery_clear(self, reason: str) -> dict[str, Any]:
        """Clear the reboot-required latch as a recorded operator override."""
        ...

    def history(self, span: str) -> dict[str, Any]:
        """Charts over ``span`` (``1h``/``24h``): one time grid, one list per series."""
        ...
