"""Test helpers shared across test modules (once in tests.web.test_documents).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI

from tests.support.documents import DOCUMENTS
from web.models import EventDocument, RecipeDocument
from web.services import EventQuery, SimulationControl

TOKEN = "s3cret"


class RecordedSim:
    """Simulation control answering with the recorded documents."""

    def inject_xid(self, card: int, xid: int, message: str | None) -> dict[str, Any]:
        return dict(DOCUMENTS["sim_xid"])

    def set_card(self, index: int, fields: dict[str, Any]) -> dict[str, Any]:
        return dict(DOCUMENTS["sim_card"])

    def reboot(self) -> dict[str, Any]:
        return dict(DOCUMENTS["sim_reboot"])


class RecordedServices:
    """The ``WebServices`` protocol answering with documents recorded from a real fleetd."""

    token = TOKEN
    loopback_only = True

    @property
    def sim(self) -> SimulationControl | None:
        return RecordedSim()

    def status_document(self) -> dict[str, Any]:
        return dict(DOCUMENTS["status"])

    def list_events(self, query: EventQuery) -> list[EventDocument]:
        return [EventDocument.model_validate(e) for e in DOCUMENTS["events"]]

    def ack_event(self, event_id: int, by: str) -> dict[str, Any]:
        return dict(DOCUMENTS["ack"])

    def apply_caps(self) -> dict[str, Any]:
        return dict(DOCUMENTS["caps"])

    def serving_action(self, action: str) -> dict[str, Any]:
        return dict(DOCUMENTS[f"serving_{action}"])

    def serving_logs(self, lines: int) -> list[str]:
        return list(DOCUMENTS["logs"]["lines"])

    def serving_follow(self, lines: int) -> Any:
        return iter(())

    def serving_recipe(self) -> RecipeDocument:
        return RecipeDocument.model_validate(DOCUMENTS["recipe"])


def request(app: FastAPI, method: str, path: str, body: Any = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://rig") as client:
            return await client.request(method, path, headers=headers, json=body)

    return asyncio.run(go())
