"""Response models document every body and change none: the API serves today's documents
back byte-for-value, extras included, and ``/openapi.json`` describes each ``/api/v1`` body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import APIRoute

from tests.support.documents import DOCUMENTS
from tests.support.recorded_services import RecordedServices, request
from web.app import create_app


def exact(document: Any) -> str:
    """JSON text that tells 180 from 180.0 and a missing key from a null one."""
    return json.dumps(document, sort_keys=True)


@pytest.mark.parametrize(
    ("method", "path", "body", "recorded"),
    [
        ("GET", "/api/v1/status", None, "status"),
        ("GET", "/api/v1/events", None, "events"),
        ("POST", "/api/v1/events/12/ack", None, "ack"),
        ("GET", "/api/v1/serving/recipe", None, "recipe"),
        ("GET", "/api/v1/serving/logs?lines=3", None, "logs"),
        ("POST", "/api/v1/caps/apply", None, "caps"),
        ("POST", "/api/v1/serving/start", None, "serving_start"),
        ("POST", "/api/v1/serving/stop", None, "serving_stop"),
        ("POST", "/api/v1/sim/xid", {"card": 1, "xid": 13}, "sim_xid"),
        ("POST", "/api/v1/sim/card/2", {"memory_total_mib": 8192}, "sim_card"),
        ("POST", "/api/v1/sim/reboot", None, "sim_reboot"),
    ],
)
def test_every_document_is_served_unchanged(
    method: str, path: str, body: Any, recorded: str
) -> None:
    answer = request(create_app(RecordedServices()), method, path, body)
    assert answer.status_code == 200, answer.text
    assert exact(answer.json()) == exact(DOCUMENTS[recorded])


def test_a_document_breaking_its_model_is_not_served() -> None:
    class Broken(RecordedServices):
        def status_document(self) -> dict[str, Any]:
            return {k: v for k, v in DOCUMENTS["status"].items() if k != "overall"}

    with pytest.raises(ResponseValidationError, match="overall"):
        request(create_app(Broken()), "GET", "/api/v1/status")


def resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    resolved: dict[str, Any] = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return resolved


def test_openapi_documents_every_api_body() -> None:
    app = create_app(RecordedServices())
    spec = request(app, "GET", "/openapi.json").json()
    routes = [
        (route.path, method.lower())
        for route in app.routes
        if isinstance(route, APIRoute) and route.path.startswith("/api/v1")
        for method in route.methods
    ]
    assert len(routes) >= 11, routes
    for path, method in routes:
        operation = spec["paths"][path][method]
        content = operation["responses"]["200"]["content"]
        assert content, (path, method)
        for media in content.values():
            schema = resolve(media["schema"], spec)
            if schema.get("type") == "array":
                schema = resolve(schema["items"], spec)
            assert schema.get("properties") or schema.get("type") == "string", (path, schema)
    status = spec["components"]["schemas"]["StatusDocument"]
    assert {"overall", "cards", "checks", "serving", "recovery"} <= set(status["required"])
    event = spec["components"]["schemas"]["EventDocument"]
    assert {"id", "ts", "kind", "card", "xid", "severity", "message"} <= set(event["required"])
