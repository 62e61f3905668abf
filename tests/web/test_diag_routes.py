"""The diagnostics routes at the HTTP boundary: token, body limits, refusals and documents.

The daemon side is a stand-in ``DiagControl`` (web never imports daemon); the daemon's own
``DiagService`` is tested in tests/daemon and end to end in tests/daemon/test_host_truth_e2e.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from serving.errors import Busy, DomainError, Refused
from tests.web.test_documents import RecordedServices, request
from web.app import create_app

CARD = {
    "card": 3,
    "pci_bus_id": "0000:61:00.0",
    "outcome": "failed",
    "tested_mib": 1024,
    "bit_errors": 37,
    "first_error_offset": 4096,
    "pattern": "0xaaaaaaaa",
    "error": None,
    "duration_s": 1.5,
}


class StandIn:
    """Answers like the daemon's DiagService, or raises what it is told to."""

    def __init__(self, error: DomainError | None = None) -> None:
        self.error = error
        self.calls: list[tuple[int | None, float, str]] = []

    def memtest(self, card: int | None, gib: float, actor: str) -> dict[str, Any]:
        self.calls.append((card, gib, actor))
        if self.error is not None:
            raise self.error
        return {"gib": gib, "cards": [CARD], "exit_code": 2, "message": "errors on card(s) 3"}

    def memtest_document(self) -> dict[str, Any]:
        return {"running": False, "cards": [{**CARD, "ts": "2026-12-03T09:00:00+00:00"}]}


def test_a_run_answers_each_cards_result_and_the_exit_code() -> None:
    diag = StandIn()
    app = create_app(RecordedServices(), diag=diag)

    answer = request(app, "POST", "/api/v1/diag/memtest", {"card": 3, "gib": 1})

    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "gib": 1,
        "cards": [CARD],
        "exit_code": 2,
        "message": "errors on card(s) 3",
    }
    assert diag.calls == [(3, 1.0, "api")]


def test_no_body_tests_every_card_over_the_default_size() -> None:
    diag = StandIn()

    answer = request(create_app(RecordedServices(), diag=diag), "POST", "/api/v1/diag/memtest")

    assert answer.status_code == 200, answer.text
    assert diag.calls == [(None, 8.0, "api")]


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (Refused("the engine is ready: stop it first", "engine_running"), 409, "engine_running"),
        (Busy("a memory test is already running", "memtest_running"), 429, "memtest_running"),
    ],
)
def test_refusals_keep_their_code(error: DomainError, status: int, code: str) -> None:
    app = create_app(RecordedServices(), diag=StandIn(error))

    answer = request(app, "POST", "/api/v1/diag/memtest", {"gib": 1})

    assert answer.status_code == status
    assert answer.json()["code"] == code


@pytest.mark.parametrize(
    "body", [{"gib": 0}, {"gib": 1000}, {"card": -1}, {"card": 64}, {"gib": 1, "cards": [1]}]
)
def test_bad_bodies_are_422(body: dict[str, Any]) -> None:
    diag = StandIn()

    answer = request(
        create_app(RecordedServices(), diag=diag), "POST", "/api/v1/diag/memtest", body
    )

    assert answer.status_code == 422
    assert diag.calls == []


def test_the_overview_and_a_daemon_without_diagnostics() -> None:
    assert (
        request(
            create_app(RecordedServices(), diag=StandIn()), "GET", "/api/v1/diag/memtest"
        ).json()["cards"][0]["ts"]
        == "2026-12-03T09:00:00+00:00"
    )
    missing = request(create_app(RecordedServices()), "GET", "/api/v1/diag/memtest")
    assert (missing.status_code, missing.json()["code"]) == (503, "no_diag")


def test_a_run_needs_the_token() -> None:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(RecordedServices(), diag=StandIn()))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post("/api/v1/diag/memtest", json={"gib": 1})

    assert asyncio.run(go()).status_code == 401


def test_openapi_documents_the_memtest_bodies() -> None:
    spec = request(create_app(RecordedServices(), diag=StandIn()), "GET", "/openapi.json").json()

    assert {"post", "get"} <= set(spec["paths"]["/api/v1/diag/memtest"])
    card = spec["components"]["schemas"]["MemtestCardDocument"]
    assert {"card", "outcome", "bit_errors", "first_error_offset"} <= set(card["properties"])
    status_card = spec["components"]["schemas"]["CardDocument"]["properties"]
    assert {"bar1_total_mib", "pcie_replay_count", "driver", "aer"} <= set(status_card)
    assert "host" in spec["components"]["schemas"]["StatusDocument"]["properties"]
