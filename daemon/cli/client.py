"""fleetctl's HTTP client for a running fleetd (token discovery, one-line errors).

Requests go through ``daemon.cli.transport`` (the standard library's ``http.client``):
``fleetctl status`` must answer in well under 150 ms and httpx alone costs more to import.
Every token remembers where it came from, so a refusal names that file or variable
instead of listing every place a token could have been.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.cli.transport import Reply, Unreachable, host_of, request
from daemon.defaults import DEFAULT_STATE_DIR, TOKEN_FILE
from web.loopback import is_loopback

# A token is 43 characters; a token file is never near this.
TOKEN_FILE_MAX_BYTES = 64 * 1024


class ClientError(Exception):
    """A request failed; ``unreachable`` tells "no daemon" from "daemon said no"."""

    def __init__(
        self,
        message: str,
        *,
        unreachable: bool = False,
        status: int | None = None,
        reason: str | None = None,
    ):
        super().__init__(message)
        self.unreachable = unreachable
        self.status = status
        self.reason = reason or message  # without the "cannot reach" wrapping


def is_local_url(url: str) -> bool:
    """True when ``url`` points at this machine (loopback)."""
    return is_loopback(host_of(url))


# What a header value may hold: printable ASCII without spaces (the daemon's tokens are
# URL-safe base64). Anything else is the wrong file, and would fail inside the HTTP code.
_TOKEN_SHAPE = re.compile(r"[!-~]+")


@dataclass(frozen=True)
class Token:
    """A token and where it was read (``--token-file /x``, ``$FLEETCTL_TOKEN``, ...)."""

    value: str
    source: str


def _checked_token(raw: str, source: str) -> str:
    """The token from ``raw`` (outer whitespace and newlines dropped), or a one-line error."""
    token = raw.strip()
    if not token:
        raise ClientError(f"{source} is empty: it should hold fleetd's <state-dir>/api-token")
    if not _TOKEN_SHAPE.fullmatch(token):
        raise ClientError(
            f"{source} does not hold a token (one line of printable ASCII, no spaces): "
            "is it fleetd's <state-dir>/api-token?"
        )
    return token


def locate_token(
    token_file: Path | None, url: str | None = None, *, file_origin: str = "--token-file"
) -> Token | None:
    """``--token-file``, else ``$FLEETCTL_TOKEN``, else the local daemon's token file.

    The local state dir's token is only offered to a daemon on this machine: it must never
    travel to another rig's URL. A token given on purpose (file or variable) that cannot be
    one is an error naming where it came from; the state dir's is only a guess, so a bad
    one there is skipped. ``file_origin`` says who named ``token_file`` (``--token-file``,
    or a rig's ``token_file`` in the fleet file).
    """
    if token_file is not None:
        from hwcheck.regular_file import read_regular  # only here: fleetctl starts fast

        try:
            raw = read_regular(token_file, TOKEN_FILE_MAX_BYTES)  # a FIFO never hangs it
        except OSError as exc:
            raise ClientError(
                f"cannot read token file {token_file} ({file_origin}): {exc.strerror}"
            ) from None
        source = f"token file {token_file} ({file_origin})"
        return Token(_checked_token(raw.decode("utf-8", "replace"), source), source)
    env = os.environ.get("FLEETCTL_TOKEN")
    if env is not None and env.strip():
        return Token(_checked_token(env, "$FLEETCTL_TOKEN"), "$FLEETCTL_TOKEN")
    if url is not None and not is_local_url(url):
        return None
    state_dir = os.environ.get("CMPFLEET_STATE_DIR", str(DEFAULT_STATE_DIR))
    if not state_dir.strip():
        # Path("") is the current directory: a token file found there is nobody's (issue 36).
        raise ClientError(
            f"CMPFLEET_STATE_DIR is empty: give the daemon's state dir (default "
            f"{DEFAULT_STATE_DIR}) or unset it"
        )
    path = Path(state_dir) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not _TOKEN_SHAPE.fullmatch(token):
        return None
    return Token(token, f"the local daemon's token file {path}")


def find_token(token_file: Path | None, url: str | None = None) -> str | None:
    """The token's value only (see ``locate_token``)."""
    found = locate_token(token_file, url)
    return None if found is None else found.value


def not_fleetd(url: str, reply: Reply) -> str:
    """The line for an answer that is not fleetd's JSON API (a web server, a proxy)."""
    return (
        f"{url} answered HTTP {reply.status} ({reply.content_type}), not fleetd's JSON API: "
        "is --url (or the rig's url) the fleetd listener?"
    )


@dataclass
class FleetClient:
    """Talks to one fleetd."""

    url: str
    token: str | None
    timeout_s: float = 10.0
    token_source: str | None = None  # where ``token`` was read, for a refusal's line

    @classmethod
    def with_token(cls, url: str, token: Token | None, timeout_s: float = 10.0) -> FleetClient:
        """A client carrying ``token`` (and where it came from)."""
        if token is None:
            return cls(url=url, token=None, timeout_s=timeout_s)
        return cls(url=url, token=token.value, timeout_s=timeout_s, token_source=token.source)

    def send(self, method: str, path: str, *, needs_token: bool = False, **kwargs: Any) -> Reply:
        """One request with the token where it belongs (``Unreachable`` with no answer).

        The token goes with POSTs and with GETs that need it (``needs_token``: the engine
        log), and with another GET only when the daemon asks for it (a 401).
        """
        url = self.url.rstrip("/") + path
        with_token = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        first = with_token if method != "GET" or needs_token else {}
        reply = request(method, url, headers=first, timeout_s=self.timeout_s, **kwargs)
        if reply.status == 401 and with_token and not first:
            reply = request(method, url, headers=with_token, timeout_s=self.timeout_s, **kwargs)
        return reply

    def _request(self, method: str, path: str, needs_token: bool = False, **kwargs: Any) -> Any:
        try:
            reply = self.send(method, path, needs_token=needs_token, **kwargs)
        except Unreachable as exc:
            reason = str(exc)
            raise ClientError(
                f"cannot reach fleetd at {self.url}: {reason} (is fleetd running? see --url)",
                unreachable=True,
                reason=reason,
            ) from None
        if reply.status in (401, 403):
            raise ClientError(token_refusal(reply.status, self.token_source), status=reply.status)
        try:
            document = reply.json()
        except ValueError:
            raise ClientError(not_fleetd(self.url, reply), unreachable=True) from None
        if reply.status >= 400:
            raise ClientError(_detail(reply.status, document), status=reply.status)
        if not isinstance(document, dict | list):
            raise ClientError(not_fleetd(self.url, reply), unreachable=True)
        return document

    def get(
        self, path: str, params: dict[str, Any] | None = None, *, needs_token: bool = False
    ) -> Any:
        """GET a JSON document (``needs_token``: send the token at once, not after a 401)."""
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        return self._request("GET", path, needs_token=needs_token, params=clean)

    def status(self, with_log_text: bool = False) -> dict[str, Any]:
        """``GET /api/v1/status``, checked to be fleetd's status document before any use.

        A JSON answer of another shape (another program on the port) is refused here, so
        ``status --json`` never prints a foreign document before failing on it.
        ``with_log_text``: send the token, for ``serving.last_log_line`` (engine output,
        only in the token holder's view) as a start's progress.
        """
        doc = self.get("/api/v1/status", needs_token=with_log_text and self.token is not None)
        if not isinstance(doc, dict) or not isinstance(doc.get("serving"), dict):
            raise ClientError(
                f"{self.url} did not answer a fleetd status document: is --url (or the "
                "rig's url) the fleetd listener?",
                unreachable=True,
            )
        return doc

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """POST (with the bearer token) and return the JSON answer."""
        return self._request("POST", path, json_body=body or {})


def token_refusal(status: int, source: str | None = None) -> str:
    """The one line for a 401 (no token) or a 403 (a wrong one), naming the token used."""
    if status == 401 or source is None:
        return (
            "fleetd wants a token: use --token-file, $FLEETCTL_TOKEN, or run as the "
            "daemon's user (who can read <state-dir>/api-token)"
        )
    return f"fleetd refused the token from {source}: use the daemon's <state-dir>/api-token"


def _detail(status: int, document: Any) -> str:
    """The daemon's reason in one line (FastAPI validation errors name the parameter)."""
    detail = document.get("detail") if isinstance(document, dict) else None
    if detail is None:
        return f"HTTP {status}: {str(document)[:200]}"
    if isinstance(detail, list):
        parts = []
        for item in detail:
            where = ".".join(str(p) for p in item.get("loc", []) if p not in ("query", "body"))
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
        return "; ".join(parts) or f"HTTP {status}"
    return str(detail)
