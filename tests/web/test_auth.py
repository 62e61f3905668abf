"""The API's auth rules, in process over ASGI (no socket): POSTs need the token; on a
non-loopback listener every endpoint but /healthz does."""

from __future__ import annotations

import asyncio
import base64

import httpx
import pytest

from tests.support.stub_services import StubServices
from web.app import create_app


def call(
    services: StubServices, method: str, path: str, token: str | None = None
) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(services))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://rig") as client:
            return await client.request(method, path, headers=headers)

    return asyncio.run(go())


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("wrong", 403), ("s3cret", 200)])
def test_posts_need_the_token(token: str | None, status: int) -> None:
    services = StubServices(loopback_only=True)
    assert call(services, "POST", "/api/v1/events/1/ack", token).status_code == status
    assert services.acked == ([1] if status == 200 else [])


def test_loopback_reads_are_open() -> None:
    services = StubServices(loopback_only=True)
    assert call(services, "GET", "/api/v1/status").status_code == 200


def test_non_loopback_needs_the_token_everywhere_but_healthz() -> None:
    services = StubServices(loopback_only=False)
    assert call(services, "GET", "/healthz").status_code == 200
    for path in ("/api/v1/status", "/api/v1/events", "/openapi.json", "/docs"):
        assert call(services, "GET", path).status_code == 401, path
        assert call(services, "GET", path, "wrong").status_code == 403, path
        assert call(services, "GET", path, "s3cret").status_code == 200, path


def test_refusals_carry_their_code() -> None:
    answer = call(StubServices(loopback_only=True), "POST", "/api/v1/serving/start", "s3cret")
    assert answer.status_code == 409
    assert answer.json() == {"detail": "reboot required: Xid 79", "code": "reboot_latch"}
    unknown = call(StubServices(loopback_only=True), "POST", "/api/v1/serving/dance", "s3cret")
    assert unknown.status_code == 422


@pytest.mark.parametrize(
    ("loopback", "method", "path", "token", "status", "code"),
    [
        (True, "POST", "/api/v1/events/1/ack", None, 401, "unauthorized"),
        (True, "POST", "/api/v1/events/1/ack", "wrong", 403, "forbidden"),
        (False, "GET", "/api/v1/status", None, 401, "unauthorized"),
        (False, "GET", "/api/v1/status", "wrong", 403, "forbidden"),
        (True, "GET", "/api/v1/nowhere", None, 404, "not_found"),
        (True, "POST", "/api/v1/sim/reboot", "s3cret", 404, "not_found"),
        (True, "GET", "/api/v1/events?limit=0", None, 422, "invalid_request"),
    ],
)
def test_every_error_body_has_a_detail_and_a_code(
    loopback: bool, method: str, path: str, token: str | None, status: int, code: str
) -> None:
    answer = call(StubServices(loopback_only=loopback), method, path, token)
    assert answer.status_code == status
    body = answer.json()
    assert body["code"] == code
    assert body["detail"]


def basic(password: str, user: str = "rig") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def raw_call(
    services: StubServices, method: str, path: str, headers: dict[str, str]
) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(services))
        async with httpx.AsyncClient(transport=transport, base_url="http://rig") as client:
            return await client.request(method, path, headers=headers)

    return asyncio.run(go())


def test_beyond_loopback_a_browser_page_load_is_challenged_for_basic() -> None:
    services = StubServices(loopback_only=False)
    page = raw_call(services, "GET", "/", {"Accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 401
    assert page.headers["www-authenticate"].startswith('Basic realm="cmpfleet"')
    # A script's request is told about the bearer token instead (no browser dialog).
    api = raw_call(services, "GET", "/api/v1/status", {"Accept": "application/json"})
    assert api.status_code == 401
    assert api.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("path", ["/", "/api/v1/status", "/api/v1/events", "/openapi.json"])
def test_beyond_loopback_reads_take_the_token_as_the_basic_password(path: str) -> None:
    services = StubServices(loopback_only=False)
    right = raw_call(services, "GET", path, {"Authorization": basic("s3cret")})
    assert right.status_code == 200
    assert raw_call(services, "GET", path, {"Authorization": basic("nope")}).status_code == 403
    assert raw_call(services, "GET", path, {}).status_code == 401


@pytest.mark.parametrize("path", ["/api/v1/serving/logs?lines=1", "/api/v1/serving/recipe"])
def test_what_shows_the_launch_needs_the_token_even_on_loopback(path: str) -> None:
    """The engine log and the recipe's argv and environment (issue 33: the recipe was open)."""
    services = StubServices(loopback_only=True)
    assert raw_call(services, "GET", path, {}).status_code == 401
    assert raw_call(services, "GET", path, {"Authorization": "Bearer nope"}).status_code == 403
    assert raw_call(services, "GET", path, {"Authorization": basic("s3cret")}).status_code == 200
    assert raw_call(services, "GET", path, {"Authorization": "Bearer s3cret"}).status_code == 200


@pytest.mark.parametrize("loopback", [True, False])
def test_writes_never_take_a_basic_login(loopback: bool) -> None:
    """A browser attaches a saved Basic login to another site's form post: not enough."""
    services = StubServices(loopback_only=loopback)
    answer = raw_call(services, "POST", "/api/v1/events/1/ack", {"Authorization": basic("s3cret")})
    assert answer.status_code == 401
    assert services.acked == []
    posted = raw_call(services, "POST", "/api/v1/events/1/ack", {"Authorization": "Bearer s3cret"})
    assert posted.status_code == 200
    assert services.acked == [1]


@pytest.mark.parametrize(
    "header", ["Basic", "Basic !!!notbase64", "Basic " + base64.b64encode(b"no-colon").decode()]
)
def test_a_malformed_basic_header_is_no_token(header: str) -> None:
    answer = raw_call(
        StubServices(loopback_only=False), "GET", "/api/v1/status", {"Authorization": header}
    )
    assert answer.status_code == 401
    assert answer.json()["code"] == "unauthorized"
