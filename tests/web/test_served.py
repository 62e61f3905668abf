"""A real simulated fleetd over loopback HTTP: its documents keep every recorded field,
request bodies are capped, and bad input gets a 422 naming the field, never its value."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support import loopback
from tests.support.documents import key_paths, recorded_paths
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from web.limits import MAX_BODY_BYTES


@pytest.fixture(scope="module")
def fleetd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("served")
    state_dir = tmp / "state"
    daemon = start_fleetd(tmp, state_dir)
    try:
        wait_until(
            lambda: daemon.get("/api/v1/status").json()["serving"]["state"] == "ready",
            30,
            "the simulated engine to be ready",
        )
        yield daemon
    finally:
        stop_all([daemon])


def post_raw(daemon: Fleetd, path: str, content: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {daemon.token}", "Content-Type": "application/json"}
    return loopback.post(daemon.url + path, content=content, headers=headers, timeout=30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("method", "path", "recorded"),
    [
        ("GET", "/api/v1/status", "status"),
        ("GET", "/api/v1/events", "events"),
        ("GET", "/api/v1/serving/recipe", "recipe"),
        ("GET", "/api/v1/serving/logs?lines=3", "logs"),
        ("POST", "/api/v1/caps/apply", "caps"),
    ],
)
def test_real_documents_keep_every_recorded_field(
    fleetd: Fleetd, method: str, path: str, recorded: str
) -> None:
    headers = {"Authorization": f"Bearer {fleetd.token}"}  # the engine log needs it
    answer = loopback.request(method, fleetd.url + path, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    missing = recorded_paths(recorded) - key_paths(answer.json(), f".{recorded}")
    assert not missing, missing


def test_a_declared_oversized_body_is_refused_unread(fleetd: Fleetd) -> None:
    payload = b'{"card": 0, "xid": 31, "message": "' + b"A" * (1024 * 1024) + b'"}'
    answer = post_raw(fleetd, "/api/v1/sim/xid", payload)
    assert answer.status_code == 413
    assert answer.json()["detail"] == f"request body too large: the limit is {MAX_BODY_BYTES} bytes"
    assert len(answer.content) < 200
    assert fleetd.get("/healthz").status_code == 200


def test_a_chunked_oversized_body_is_cut_off(fleetd: Fleetd) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"card": 0, "xid": 31, "message": "'
        for _ in range(256):
            yield b"A" * 1024

    answer = post_raw(fleetd, "/api/v1/sim/xid", chunks())
    assert answer.status_code == 413
    assert b"AAAA" not in answer.content


def test_a_body_under_the_cap_still_works(fleetd: Fleetd) -> None:
    answer = fleetd.post("/api/v1/sim/xid", {"card": 0, "xid": 13, "message": "A" * 1000})
    assert answer.status_code == 200, answer.text


def test_a_422_names_the_field_and_never_echoes_the_input(fleetd: Fleetd) -> None:
    answer = fleetd.post("/api/v1/sim/xid", {"card": 0, "xid": "B" * 5000})
    assert answer.status_code == 422
    assert "BBBB" not in answer.text
    (error,) = answer.json()["detail"]
    assert error["loc"] == ["body", "xid"]
    assert "\n" not in error["msg"]


def test_an_xid_beyond_any_float_is_a_422_not_a_500(fleetd: Fleetd) -> None:
    answer = post_raw(fleetd, "/api/v1/sim/xid", b'{"card": 0, "xid": 1e400}')
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["detail"]
    assert error["loc"] == ["body", "xid"]
    assert error["msg"] == "Input should be a finite number"


def test_a_simulated_reading_beyond_any_float_is_refused(fleetd: Fleetd) -> None:
    answer = post_raw(fleetd, "/api/v1/sim/card/0", b'{"power_draw_w": 1e400}')
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == "power_draw_w: not a finite number"
    assert fleetd.get("/api/v1/status").status_code == 200
