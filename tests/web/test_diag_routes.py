"""The diagnostics routes at the HTTP boundary: token, body limits, refusals and documents.

The daemon side is a stand-in ``DiagControl`` (web never imports daemon); the daemon's own
``DiagService`` is tested in tests/daemon and end to end in tests/daemon/test_host_truth_e2e.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from hwcheck.memtest.patterns import PATTERNS
from hwcheck.memtest.results import MemtestPlan
from serving.errors import Busy, DomainError, Refused
from tests.support.recorded_services import RecordedServices, request
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
    "bad_words": 3,
    "zero_bursts": 0,
    "blocks": [[5, 1], [9, 2]],
    "blocks_failed": 2,
    "blocks_tested": 512,
    "block_kib": 2048,
    "gib_per_s": 910.5,
    "verdict": "a few fixed blocks: 2 of 512 2 MiB blocks fail (#5, #9) ...",
    "runs": [
        {
            "pattern": "solid",
            "pass_number": 1,
            "bit_errors": 37,
            "bad_words": 3,
            "zero_bursts": 0,
            "first_bad": [{"offset": 4096, "expected": 0, "got": 8}],
            "blocks": [[5, 1], [9, 2]],
            "blocks_failed": 2,
            "duration_s": 0.4,
            "gib_per_s": 910.5,
            "planted": 0,
            "planted_found": 0,
            "cycles": 0,
        }
    ],
    "seed": 7,
    "planted": 0,
    "planted_found": 0,
}
RUN = {"gib": 1, "patterns": ["solid"], "passes": 1, "minutes": 0, "inject": False, "seed": 7}


class StandIn:
    """Answers like the daemon's DiagService, or raises what it is told to."""

    def __init__(self, error: DomainError | None = None) -> None:
        self.error = error
        self.calls: list[tuple[int | Sequence[int] | None, MemtestPlan, str, int | None]] = []

    def memtest(
        self,
        card: int | Sequence[int] | None,
        plan: MemtestPlan,
        actor: str,
        seed: int | None = None,
    ) -> dict[str, Any]:
        self.calls.append((card, plan, actor, seed))
        if self.error is not None:
            raise self.error
        return {**RUN, "cards": [CARD], "exit_code": 2, "message": "errors on card(s) 3"}

    def memtest_document(self) -> dict[str, Any]:
        progress = {"card": 3, "pattern": "walking", "pass_number": 1, "passes": 1}
        return {
            "running": True,
            "cards": [{**CARD, "ts": "2026-12-03T09:00:00+00:00"}],
            "progress": [{**progress, "step": 17, "steps": 128, "bad_words": 0}],
        }


def test_a_run_answers_each_cards_result_and_the_exit_code() -> None:
    diag = StandIn()
    app = create_app(RecordedServices(), diag=diag)
    body = {
        "card": 3,
        "gib": 1,
        "patterns": ["moving-inversions", "solid"],
        "passes": 2,
        "minutes": 1.5,
        "inject": True,
        "seed": 99,
    }

    answer = request(app, "POST", "/api/v1/diag/memtest", body)

    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        **RUN,
        "cards": [CARD],
        "exit_code": 2,
        "message": "errors on card(s) 3",
    }
    plan = MemtestPlan(1024, ("moving-inversions", "solid"), 2, 90.0, True)
    assert diag.calls == [(3, plan, "api", 99)]


def test_no_body_tests_every_card_over_all_free_memory_with_every_pattern() -> None:
    diag = StandIn()

    answer = request(create_app(RecordedServices(), diag=diag), "POST", "/api/v1/diag/memtest")

    assert answer.status_code == 200, answer.text
    assert diag.calls == [(None, MemtestPlan(None, PATTERNS, 1, 0.0, False), "api", None)]


def test_several_cards_are_passed_on_and_card_with_cards_is_422() -> None:
    diag = StandIn()
    app = create_app(RecordedServices(), diag=diag)

    answer = request(app, "POST", "/api/v1/diag/memtest", {"cards": [0, 2]})

    assert answer.status_code == 200, answer.text
    assert diag.calls[0][0] == [0, 2]
    both = request(app, "POST", "/api/v1/diag/memtest", {"card": 1, "cards": [0, 2]})
    assert both.status_code == 422 and "not both" in both.text
    for bad in ([], [64]):
        assert request(app, "POST", "/api/v1/diag/memtest", {"cards": bad}).status_code == 422
    assert len(diag.calls) == 1


def test_an_unknown_pattern_is_422_naming_the_known_ones() -> None:
    diag = StandIn()
    app = create_app(RecordedServices(), diag=diag)

    answer = request(app, "POST", "/api/v1/diag/memtest", {"patterns": ["solid", "gallop"]})

    assert answer.status_code == 422
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["body", "patterns"]
    assert "unknown pattern 'gallop' (the patterns: solid, checkerboard," in problem["msg"]
    assert diag.calls == []


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
    "body",
    [
        {"gib": 0},
        {"gib": 1000},
        {"card": -1},
        {"card": 64},
        {"gib": 1, "cardz": [1]},
        {"cards": [1, 99]},
        {"passes": 0},
        {"minutes": -1},
        {"seed": -1},
    ],
)
def test_bad_bodies_are_422(body: dict[str, Any]) -> None:
    diag = StandIn()

    answer = request(
        create_app(RecordedServices(), diag=diag), "POST", "/api/v1/diag/memtest", body
    )

    assert answer.status_code == 422
    assert diag.calls == []


def test_the_overview_and_a_daemon_without_diagnostics() -> None:
    overview = request(
        create_app(RecordedServices(), diag=StandIn()), "GET", "/api/v1/diag/memtest"
    ).json()
    assert overview["cards"][0]["ts"] == "2026-12-03T09:00:00+00:00"
    assert overview["cards"][0]["blocks"] == [[5, 1], [9, 2]]
    assert overview["progress"][0]["step"] == 17
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
    assert {
        "card",
        "outcome",
        "bit_errors",
        "first_error_offset",
        "blocks",
        "verdict",
        "runs",
    } <= set(card["properties"])
    body = spec["components"]["schemas"]["MemtestRequest"]["properties"]
    assert {"card", "gib", "patterns", "passes", "minutes", "inject", "seed"} <= set(body)
    status_card = spec["components"]["schemas"]["CardDocument"]["properties"]
    assert {"bar1_total_mib", "pcie_replay_count", "driver", "aer"} <= set(status_card)
    assert "host" in spec["components"]["schemas"]["StatusDocument"]["properties"]
