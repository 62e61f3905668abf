"""What ``/openapi.json`` and ``/docs`` say: a bearer scheme and descriptions in plain text.

The routes' descriptions come from their docstrings, written for the code (reST double
backticks, lines wrapped at 100 columns); a person reading ``/docs`` or a generated
client's help should get sentences instead: literals lose their backticks and wrapped
lines are joined (blank lines still part paragraphs). ``BEARER`` is the security scheme
the token-guarded routes declare, so ``/docs`` shows the Authorize button and a lock on
each of them; the token is ``<state-dir>/api-token``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.security import HTTPBearer

BEARER = HTTPBearer(
    auto_error=False,  # the app answers 401/403 itself, with its own error document
    scheme_name="token",
    description="fleetd's API token: the content of <state-dir>/api-token (mode 0600).",
)
_LITERAL = re.compile(r"``(.+?)``")
_TEXT_KEYS = frozenset({"description", "summary"})


def plain_text(text: str) -> str:
    """Literals without their backticks, wrapped lines joined (paragraphs kept)."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    joined = (" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    return "\n\n".join(_LITERAL.sub(r"\1", paragraph) for paragraph in joined)


def _rewrite(node: Any) -> None:
    """Every description and summary in the schema, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _TEXT_KEYS and isinstance(value, str):
                node[key] = plain_text(value)
            else:
                _rewrite(value)
    elif isinstance(node, list):
        for item in node:
            _rewrite(item)


def install_plain_openapi(app: FastAPI) -> None:
    """Make ``app``'s schema (built once, on first request) speak plain text."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _rewrite(build())  # FastAPI keeps it in app.openapi_schema
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented hook
