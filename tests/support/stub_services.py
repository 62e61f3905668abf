"""Test helpers shared across test modules (once in tests.web.test_auth).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

from typing import Any

from serving.errors import NotFound, Refused
from tests.support.documents import DOCUMENTS
from web.models import EventDocument
from web.services import EventQuery, SimulationControl


class StubServices:
    """A stand-in for the daemon at the web layer's boundary (the WebServices protocol)."""

    def __init__(self, loopback_only: bool) -> None:
        self.token = "s3cret"
        self.loopback_only = loopback_only
        self.acked: list[int] = []

    @property
    def sim(self) -> SimulationControl | None:
        return None

    def status_document(self) -> dict[str, Any]:
        return dict(DOCUMENTS["status"])

    def list_events(self, query: EventQuery) -> list[EventDocument]:
        return []

    def ack_event(self, event_id: int, by: str) -> dict[str, Any]:
        if event_id != 1:
            raise NotFound(f"no event {event_id}")
        self.acked.append(event_id)
        return {"id": event_id, "acked": True}

    def apply_caps(self) -> dict[str, Any]:
        return {}

    def serving_action(self, action: str) -> dict[str, Any]:
        raise Refused("reboot required: Xid 79", "reboot_latch")

    def serving_logs(self, lines: int) -> list[str]:
        return []

    def serving_follow(self, lines: int) -> Any:
        return iter(())

    def serving_recipe(self) -> dict[str, Any]:
        recipe: dict[str, Any] = DOCUMENTS["recipe"]
        return recipe
