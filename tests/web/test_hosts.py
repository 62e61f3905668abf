"""A loopback listener answers only to this machine's names (DNS rebinding), in process."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from tests.support.stub_services import StubServices
from web.app import create_app
from web.hosts import allowed_hosts, host_name


def get(host: str | None, allowed: list[str] | None) -> httpx.Response:
    async def go() -> httpx.Response:
        app = create_app(StubServices(loopback_only=True), allowed_hosts=allowed)  # type: ignore[arg-type]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8170") as c:
            request = c.build_request("GET", "/api/v1/status")
            if host is None:
                del request.headers["host"]
            else:
                request.headers["host"] = host
            return await c.send(request)

    return asyncio.run(go())


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8170",
        "127.0.0.2",
        "localhost:8170",
        "LOCALHOST",
        "[::1]:8170",
        "rig-7",
        "RIG-7:8170",
        "proxy.example",
        None,
    ],
)
def test_loopback_and_this_machines_names_are_served(host: str | None) -> None:
    assert get(host, ["rig-7", "proxy.example"]).status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8170",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "dash.localhost",  # the listener's own loopback rule: no name but localhost itself
        "10.0.0.5:8170",
    ],
)
def test_any_other_name_is_refused_before_a_route_runs(host: str) -> None:
    answer = get(host, ["rig-7"])
    assert answer.status_code == 403
    body = answer.json()
    assert body["code"] == "host_not_allowed"
    assert "allowed_hosts" in body["detail"]


def test_without_allowed_hosts_there_is_no_check() -> None:
    """A non-loopback listener: every request needs the token anyway."""
    assert get("evil.example", None).status_code == 200


@pytest.mark.parametrize(
    ("header", "name"),
    [("Rig:8170", "rig"), ("[::1]:80", "::1"), ("[::1]", "::1"), ("10.0.0.1", "10.0.0.1")],
)
def test_host_name_drops_port_and_brackets(header: str, name: str) -> None:
    assert host_name(header) == name


def test_a_loopback_listener_allows_this_machines_name_and_the_configs() -> None:
    assert allowed_hosts("127.0.0.1", ["rig-7.lan"]) == [socket.gethostname(), "rig-7.lan"]
    assert allowed_hosts("::1", []) == [socket.gethostname()]
    assert allowed_hosts("0.0.0.0", ["rig-7.lan"]) is None  # the token guards every request
