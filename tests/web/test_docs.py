"""``/docs`` and ``/redoc`` work on an offline rig: every script, style and icon they load is
served by the app itself (no CDN, no validator badge calling out), and ``/openapi.json``
lists every ``/api/v1`` route, the documented ones among them."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from fastapi.routing import APIRoute

from tests.support.recorded_services import RecordedServices, request
from web.app import create_app
from web.version import __version__

CONTRACT_PATHS = {
    "/api/v1/status",
    "/api/v1/events",
    "/api/v1/events/{event_id}/ack",
    "/api/v1/serving/{action}",
    "/api/v1/serving/logs",
    "/api/v1/recovery/reboot",
    "/api/v1/recovery/clear",
    "/api/v1/sim/xid",
    "/api/v1/sim/card/{index}",
    "/api/v1/sim/reboot",
}
OUTSIDE = re.compile(r"""(?:https?:)?//[^\s"'<>)]+""")


class References(HTMLParser):
    """Every ``src`` and ``href`` of a page, and its inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        self.urls += [value for name, value in attrs if name in {"src", "href"} and value]

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_ui_loads_nothing_from_outside(page: str) -> None:
    app = create_app(RecordedServices())
    answer = request(app, "GET", page)
    assert answer.status_code == 200
    html = answer.text
    assert OUTSIDE.findall(html) == [], "the page names an outside URL"
    refs = References()
    refs.feed(html)
    script_urls = re.findall(r"""url:\s*['"]([^'"]+)['"]""", "".join(refs.scripts))
    assert "/openapi.json" in script_urls or "/openapi.json" in html
    assert any(url.endswith(".js") for url in refs.urls), refs.urls  # the bundle, served here
    for url in [*refs.urls, *script_urls]:
        assert url.startswith("/"), url
        assert request(app, "GET", url).status_code == 200, url
    if page == "/docs":
        assert '"validatorUrl": null' in html  # no badge fetched from validator.swagger.io


def test_openapi_lists_every_api_route_and_contracts() -> None:
    app = create_app(RecordedServices())
    spec = request(app, "GET", "/openapi.json").json()
    served = {
        route.path
        for route in app.routes
        if isinstance(route, APIRoute) and route.path.startswith("/api/v1")
    }
    assert served <= set(spec["paths"])
    missing = CONTRACT_PATHS - set(spec["paths"])
    assert not missing, f"documented routes missing from /openapi.json: {sorted(missing)}"


def walk_texts(node: object) -> list[str]:
    """Every description and summary in a schema."""
    if isinstance(node, dict):
        return [
            text
            for key, value in node.items()
            for text in ([value] if key in ("description", "summary") else walk_texts(value))
            if isinstance(text, str)
        ]
    if isinstance(node, list):
        return [text for item in node for text in walk_texts(item)]
    return []


def test_openapi_declares_the_bearer_token_on_the_guarded_routes() -> None:
    spec = request(create_app(RecordedServices()), "GET", "/openapi.json").json()
    scheme = spec["components"]["securitySchemes"]["token"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")  # /docs: Authorize
    ack = spec["paths"]["/api/v1/events/{event_id}/ack"]["post"]
    assert ack["security"] == [{"token": []}]
    assert "security" not in spec["paths"]["/api/v1/status"]["get"]  # loopback reads: none


def test_openapi_descriptions_are_plain_text() -> None:
    spec = request(create_app(RecordedServices()), "GET", "/openapi.json").json()
    texts = walk_texts(spec)
    assert len(texts) > 50  # the walk found them (the check can fail)
    assert [t for t in texts if "``" in t] == []
    status = spec["paths"]["/api/v1/status"]["get"]["description"]
    assert status.startswith("The rig overview (same document as fleetctl status --json).")


def test_healthz_answers_head_and_says_the_version() -> None:
    app = create_app(RecordedServices())
    assert request(app, "GET", "/healthz").json() == {"status": "ok", "version": __version__}
    head = request(app, "HEAD", "/healthz")
    assert head.status_code == 200 and head.content == b""
