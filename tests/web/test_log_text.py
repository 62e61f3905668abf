"""The engine's log text in the status document: for the token holder only.

``serving.last_log_line`` is engine output (it can be a user's prompt); the status is read
without the token on loopback, so the token-free view leaves the line out.
"""

from __future__ import annotations

import asyncio

import httpx

from tests.support.documents import DOCUMENTS
from tests.support.recorded_services import TOKEN, RecordedServices
from web.app import create_app

LINE = DOCUMENTS["status"]["serving"]["last_log_line"]


def _status(headers: dict[str, str]) -> dict[str, object]:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(RecordedServices()))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get("/api/v1/status", headers=headers)

    answer = asyncio.run(go())
    assert answer.status_code == 200, answer.text
    serving: dict[str, object] = answer.json()["serving"]
    return serving


def test_the_token_holder_sees_the_last_log_line() -> None:
    assert LINE
    assert _status({"Authorization": f"Bearer {TOKEN}"})["last_log_line"] == LINE


def test_without_the_token_the_status_has_no_log_text() -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        serving = _status(headers)
        assert "last_log_line" not in serving
        assert serving["state"] == DOCUMENTS["status"]["serving"]["state"]  # the rest is there
