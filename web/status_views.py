"""The status document in two views: with the engine's log text for the token holder only.

``serving.last_log_line`` is the engine's newest output line: a loading bar most of the
time, but on a serving engine it can be a user's prompt, and it is engine output like the
log itself, which needs the token even on loopback. The status document is read without
the token there (the dashboard, ``fleetctl status``, monitoring), so it is rendered twice:
the token holder's view with the line (``fleetctl start`` shows it as progress), everyone
else's without it. Each view is a shared render (``web.rendered``), so fifty token-free
readers still cost one render.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import ResponseValidationError
from pydantic import ValidationError

from web.auth import request_token, token_matches
from web.models import StatusDocument
from web.rendered import RenderedDocument, RenderedDocuments
from web.services import WebServices

# Keys of the status document's ``serving`` block (and each of ``engines``) that hold
# engine output.
LOG_TEXT_KEYS = ("last_log_line",)


def render_status(services: WebServices, *, log_text: bool) -> bytes:
    """The status document as ``GET /api/v1/status`` sends it (validated, unset fields out).

    A document breaking its model fails as FastAPI's own response check would (a 500 and
    ``ResponseValidationError`` in the log), never reaching a client half right. Without
    ``log_text`` the engine's output keys are left out as the document is written.
    """
    try:
        validated = StatusDocument.model_validate(services.status_document())
    except ValidationError as exc:
        raise ResponseValidationError(exc.errors(include_url=False)) from None
    hidden: dict[str, Any] = dict.fromkeys(LOG_TEXT_KEYS, True)
    exclude = None if log_text else {"serving": hidden, "engines": {"__all__": hidden}}
    return validated.model_dump_json(exclude_unset=True, exclude=exclude).encode()


class StatusViews:
    """The two rendered views, and which one a request may read."""

    def __init__(self, documents: RenderedDocuments, services: WebServices) -> None:
        self._token = services.token
        self.public = documents.add("status", lambda: render_status(services, log_text=False))
        self.with_log_text = documents.add(
            "status-with-log-text", lambda: render_status(services, log_text=True)
        )

    def for_request(self, request: Request) -> RenderedDocument:
        """The token holder's view when the request carries the token, else the public one.

        A wrong token is not refused here (the status needs none on loopback): it only
        does not see the log text.
        """
        given = request_token(request)
        if given is not None and token_matches(self._token, given):
            return self.with_log_text
        return self.public
