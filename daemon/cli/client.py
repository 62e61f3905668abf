"""fleetctl's HTTP client for a running fleetd (token discovery, one-line errors)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from daemon.config import DEFAULT_STATE_DIR
from daemon.statedir import StateDir
from web.loopback import is_loopback


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
    return is_loopback(httpx.URL(url).host)


PORT_LIMIT = 65536


def url_problem(url: str) -> str | None:
    """Why ``url`` is not fleetd's ``http(s)://HOST[:PORT]`` URL, or None when it is one.

    Checked before any request, so ``--url 127.0.0.1:8170`` gets this one line instead
    of an "UnsupportedProtocol" from the HTTP library.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        return f"{url!r} is not a URL: {exc}"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return f"{url!r} is not an http(s)://HOST[:PORT] URL"
    if parsed.port is not None and not 0 < parsed.port < PORT_LIMIT:
        return f"{url!r}: port {parsed.port} is out of range (1-65535)"
    return None


# What a header value may hold: printable ASCII without spaces (the daemon's tokens are
# URL-safe base64). Anything else is the wrong file, and would fail inside the HTTP library.
_TOKEN_SHAPE = re.compile(r"[!-~]+")


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


def find_token(token_file: Path | None, url: str | None = None) -> str | None:
    """``--token-file``, else ``$FLEETCTL_TOKEN``, else the local daemon's token file.

    The local state dir's token is only offered to a daemon on this machine: it must never
    travel to another rig's URL. A token given on purpose (file or variable) that cannot be
    one is an error naming where it came from; the state dir's is only a guess, so a bad
    one there is skipped.
    """
    if token_file is not None:
        try:
            raw = token_file.read_bytes()
        except OSError as exc:
            raise ClientError(f"cannot read token file {token_file}: {exc.strerror}") from None
        return _checked_token(raw.decode("utf-8", "replace"), f"token file {token_file}")
    env = os.environ.get("FLEETCTL_TOKEN")
    if env is not None and env.strip():
        return _checked_token(env, "$FLEETCTL_TOKEN")
    if url is not None and not is_local_url(url):
        return None
    state_dir = Path(os.environ.get("CMPFLEET_STATE_DIR", DEFAULT_STATE_DIR))
    try:
        token = StateDir(state_dir).token.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token if _TOKEN_SHAPE.fullmatch(token) else None


def unreachable_reason(exc: httpx.HTTPError, timeout_s: float) -> str:
    """Why a request got no answer, in words (not the HTTP library's class name)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {timeout_s:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"connected, but no answer within {timeout_s:g} s"
    if isinstance(exc, httpx.ConnectError):
        # "[Errno 111] Connection refused" -> "connection refused"
        text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(exc)).strip() or "connection failed"
        return text[0].lower() + text[1:]
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the peer broke off the HTTP exchange ({exc})"
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__


def not_fleetd(url: str, response: httpx.Response) -> str:
    """The line for an answer that is not fleetd's JSON API (a web server, a proxy)."""
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    return (
        f"{url} answered HTTP {response.status_code} ({kind}), not fleetd's JSON API: "
        "is --url (or the rig's url) the fleetd listener?"
    )


@dataclass
class FleetClient:
    """Talks to one fleetd."""

    url: str
    token: str | None
    timeout_s: float = 10.0

    def send(
        self, method: str, path: str, *, needs_token: bool = False, **kwargs: Any
    ) -> httpx.Response:
        """One request with the token where it belongs.

        The token goes with POSTs and with GETs that need it (``needs_token``: the engine
        log), and with another GET only when the daemon asks for it (a 401).
        """
        url = self.url.rstrip("/") + path
        with_token = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        first = with_token if method != "GET" or needs_token else {}
        response = httpx.request(method, url, headers=first, timeout=self.timeout_s, **kwargs)
        if response.status_code == 401 and with_token and not first:
            response = httpx.request(
                method, url, headers=with_token, timeout=self.timeout_s, **kwargs
            )
        return response

    def _request(self, method: str, path: str, needs_token: bool = False, **kwargs: Any) -> Any:
        try:
            response = self.send(method, path, needs_token=needs_token, **kwargs)
        except httpx.HTTPError as exc:
            reason = unreachable_reason(exc, self.timeout_s)
            raise ClientError(
                f"cannot reach fleetd at {self.url}: {reason} (is fleetd running? see --url)",
                unreachable=True,
                reason=reason,
            ) from None
        if response.status_code in (401, 403):
            raise ClientError(token_refusal(response.status_code), status=response.status_code)
        try:
            document = response.json()
        except ValueError:
            raise ClientError(not_fleetd(self.url, response), unreachable=True) from None
        if response.status_code >= 400:
            raise ClientError(_detail(response.status_code, document), status=response.status_code)
        if not isinstance(document, dict | list):
            raise ClientError(not_fleetd(self.url, response), unreachable=True)
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
        return self._request("POST", path, json=body or {})


def token_refusal(status: int) -> str:
    """The one line for a 401 (no token) or a 403 (a wrong one), with where to get it."""
    if status == 401:
        return (
            "fleetd wants a token: use --token-file, $FLEETCTL_TOKEN, or run as the daemon's user"
        )
    return (
        "fleetd refused the token (from --token-file, $FLEETCTL_TOKEN or the state dir's "
        "api-token): use the daemon's <state-dir>/api-token"
    )


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
