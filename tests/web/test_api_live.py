"""The API additions against a real simulated fleetd on loopback: event pages and time
windows, the engine log as text and as server-sent events, the live status stream, and a
fleetd that shuts down promptly while a stream is open."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import loopback
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=5)


@pytest.fixture(scope="module")
def fleetd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("api")
    daemon = start_fleetd(tmp, tmp / "state")
    try:
        wait_until(
            lambda: daemon.get("/api/v1/status").json()["serving"]["state"] == "ready",
            30,
            "the simulated engine to be ready",
        )
        for xid in (43, 13, 43, 13):  # application-class: no recovery move
            assert daemon.post("/api/v1/sim/xid", {"card": 0, "xid": xid}).status_code == 200
        wait_until(lambda: len(events(daemon, kind="xid")) == 4, 10, "four Xid events")
        yield daemon
    finally:
        stop_all([daemon])


def events(daemon: Fleetd, **params: Any) -> list[dict[str, Any]]:
    answer = loopback.get(f"{daemon.url}/api/v1/events", params=params, timeout=10)
    assert answer.status_code == 200, answer.text
    return list(answer.json())


def auth(daemon: Fleetd) -> dict[str, str]:
    return {"Authorization": f"Bearer {daemon.token}"}


def sse_frames(lines: Iterator[str], wanted: int, timeout_s: float) -> list[dict[str, str]]:
    """The first ``wanted`` frames (``{field: value}``) of an SSE body, comments skipped."""
    frames: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    for line in lines:
        assert time.monotonic() < deadline, f"only {len(frames)} frames in {timeout_s} s"
        if line == "":
            if frame:
                frames.append(frame)
                frame = {}
            if len(frames) == wanted:
                return frames
        elif not line.startswith(":"):
            field, _, value = line.partition(": ")
            frame[field] = value
    raise AssertionError(f"the stream ended after {len(frames)} frames")


def test_events_page_back_with_a_cursor_and_a_next_link(fleetd: Fleetd) -> None:
    everything = events(fleetd, kind="xid")
    first = loopback.get(f"{fleetd.url}/api/v1/events", params={"kind": "xid", "limit": 3})
    assert [e["id"] for e in first.json()] == [e["id"] for e in everything[:3]]
    link = first.headers["link"]
    match = re.fullmatch(r'<(/api/v1/events\?[^>]+)>; rel="next"', link)
    assert match, link
    second = loopback.get(fleetd.url + match.group(1), timeout=10)
    assert [e["id"] for e in second.json()] == [everything[3]["id"]]
    assert "link" not in second.headers  # a short page is the last one
    ids = [e["id"] for e in everything]
    assert ids == sorted(ids, reverse=True)


def test_events_time_window_and_filters(fleetd: Fleetd) -> None:
    xids = events(fleetd, kind="xid")
    oldest, newest = xids[-1], xids[0]
    window = events(fleetd, kind="xid", since=oldest["ts"], until=oldest["ts"])
    assert [e["id"] for e in window] == [oldest["id"]]
    later = datetime.fromisoformat(newest["ts"]) + timedelta(seconds=1)
    assert events(fleetd, kind="xid", since=later.isoformat()) == []
    assert {e["xid"] for e in events(fleetd, kind="xid", card=0)} == {13, 43}


def test_acknowledge_then_filter_on_it(fleetd: Fleetd) -> None:
    target = events(fleetd, kind="xid")[1]
    acked = fleetd.post(f"/api/v1/events/{target['id']}/ack")
    assert acked.json() == {"id": target["id"], "acked": True}
    (seen,) = events(fleetd, kind="xid", acked="true")
    assert seen["id"] == target["id"]
    assert seen["acked_by"] == "api"
    assert datetime.fromisoformat(seen["acked_at"]).tzinfo is not None
    assert target["id"] not in [e["id"] for e in events(fleetd, kind="xid", acked="false")]


def test_bad_event_queries_name_what_is_wrong(fleetd: Fleetd) -> None:
    url = f"{fleetd.url}/api/v1/events"
    unknown = loopback.get(url, params={"before_id": 99_999_999}, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "before_id 99999999: no such event", "code": "not_found"}
    bogus = loopback.get(url, params={"kind": "bogus"}, timeout=10)
    assert bogus.status_code == 422
    (problem,) = bogus.json()["detail"]
    assert problem["loc"] == ["query", "kind"] and "'xid'" in problem["msg"]


@pytest.mark.parametrize(
    "edge", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+23:59"]
)
def test_a_time_at_the_calendars_edge_is_a_422_not_a_500(fleetd: Fleetd, edge: str) -> None:
    for param in ("since", "until"):
        answer = loopback.get(f"{fleetd.url}/api/v1/events", params={param: edge}, timeout=10)
        assert answer.status_code == 422, answer.text
        (problem,) = answer.json()["detail"]
        assert problem["loc"] == ["query", param] and "range" in problem["msg"]


@pytest.mark.parametrize("confirm", ["yes", 1, "on", "true", None])
def test_only_the_json_true_confirms_a_reboot(fleetd: Fleetd, confirm: object) -> None:
    answer = loopback.post(
        f"{fleetd.url}/api/v1/recovery/reboot",
        json={"confirm": confirm},
        headers=auth(fleetd),
        timeout=10,
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "confirm"]
    assert fleetd.get("/api/v1/status").json()["serving"]["state"] == "ready"


def test_the_log_tail_as_text(fleetd: Fleetd) -> None:
    answer = loopback.get(
        f"{fleetd.url}/api/v1/serving/logs/text", params={"lines": 3}, headers=auth(fleetd)
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    as_text = answer.text.splitlines()
    assert 0 < len(as_text) <= 3
    # The engine may log more in between: the text tail is a run of the JSON tail after it.
    as_json = loopback.get(
        f"{fleetd.url}/api/v1/serving/logs", params={"lines": 500}, headers=auth(fleetd)
    ).json()["lines"]
    runs = [as_json[i : i + len(as_text)] for i in range(len(as_json))]
    assert as_text in runs, (as_text, as_json[-10:])
    assert loopback.get(f"{fleetd.url}/api/v1/serving/logs/text").status_code == 401


def test_the_log_as_server_sent_events(fleetd: Fleetd) -> None:
    url = f"{fleetd.url}/api/v1/serving/logs/stream"
    with httpx.stream("GET", url, params={"lines": 2}, headers=auth(fleetd), timeout=10) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        frames = sse_frames(answer.iter_lines(), 3, 10)
    assert frames[0] == {"retry": "2000"}
    assert [f["event"] for f in frames[1:]] == ["line", "line"]
    streamed = [f["data"] for f in frames[1:]]
    log = loopback.get(
        f"{fleetd.url}/api/v1/serving/logs", params={"lines": 500}, headers=auth(fleetd)
    ).json()["lines"]
    assert streamed in [log[i : i + 2] for i in range(len(log))], (streamed, log[-10:])


def test_the_status_stream_pushes_the_status_document(fleetd: Fleetd) -> None:
    url = f"{fleetd.url}/api/v1/stream"
    began = time.monotonic()
    with httpx.stream("GET", url, params={"interval_s": 0.2}, timeout=10) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        frames = sse_frames(answer.iter_lines(), 4, 10)
    assert time.monotonic() - began < 5
    assert frames[0] == {"retry": "2000"}
    assert [f["event"] for f in frames[1:]] == ["status"] * 3
    assert [int(f["id"]) for f in frames[1:]] == [1, 2, 3]
    documents = [json.loads(f["data"]) for f in frames[1:]]
    status = loopback.get(f"{fleetd.url}/api/v1/status").json()
    for document in documents:
        assert set(document) == set(status)
        assert [c["index"] for c in document["cards"]] == [0, 1, 2, 3]
        assert document["serving"]["state"] == "ready"
    assert documents[0]["overall"] in {"ok", "warning"}


def test_fleetd_stops_promptly_with_a_stream_open(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", config=config)
    try:
        with httpx.stream("GET", f"{daemon.url}/api/v1/stream", timeout=10) as answer:
            sse_frames(answer.iter_lines(), 2, 10)
            began = time.monotonic()
            assert daemon.stop(timeout_s=20) == 0
            assert time.monotonic() - began < 5, "fleetd waited on the open stream"
    finally:
        stop_all([daemon])


def test_a_rebound_host_name_is_refused_on_loopback(fleetd: Fleetd) -> None:
    """DNS rebinding: a page on evil.example re-pointed at 127.0.0.1 gets nothing."""
    rebound = loopback.get(fleetd.url + "/api/v1/status", headers={"Host": "evil.example:8170"})
    assert rebound.status_code == 403
    assert rebound.json()["code"] == "host_not_allowed"
    own = loopback.get(fleetd.url + "/api/v1/status", headers={"Host": socket.gethostname()})
    assert own.status_code == 200
    local = loopback.get(fleetd.url + "/healthz", headers={"Host": "localhost:8170"})
    assert local.status_code == 200
