"""fleetctl's HTTP client for a running fleetd (token discovery, one-line errors)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from daemon.config import DEFAULT_STATE_DIR
from daemon.loopback import is_loopback
from daemon.statedir import StateDir


class ClientError(Exception):
    """A request failed; ``unreachable`` tells "no daemon" from "daemon said no"."""

    def __init__(self, message: str, *, unreachable: bool = False, status: int | None = None):
        super().__init__(message)
        self.unreachable = unreachable
        self.status = status


def is_local_url(url: str) -> bool:
    """True when ``url`` points at this machine (loopback)."""
    return is_loopback(httpx.URL(url).host)


def find_token(token_file: Path | None, url: str | None = None) -> str | None:
    """``--token-file``, else ``$FLEETCTL_TOKEN``, else the local daemon's token file.

    The local state dir's token is only offered to a daemon on this machine: it must never
    travel to another rig's URL.
    """
    if token_file is not None:
        try:
            return token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ClientError(f"cannot read token file {token_file}: {exc.strerror}") from None
    env = os.environ.get("FLEETCTL_TOKEN")
    if env:
        return env.strip()
    if url is not None and not is_local_url(url):
        return None
    state_dir = Path(os.environ.get("CMPFLEET_STATE_DIR", DEFAULT_STATE_DIR))
    try:
        return StateDir(state_dir).token.read_text(encoding="utf-8").strip()
    except OSError:
        return None


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
            raise ClientError(
                f"cannot reach fleetd at {self.url}: {exc.__class__.__name__} "
                "(is fleetd running? see --url)",
                unreachable=True,
            ) from None
        if response.status_code in (401, 403):
            raise ClientError(token_refusal(response.status_code), status=response.status_code)
        if response.status_code >= 400:
            raise ClientError(_detail(response), status=response.status_code)
        return response.json()

    def get(
        self, path: str, params: dict[str, Any] | None = None, *, needs_token: bool = False
    ) -> Any:
        """GET a JSON document (``needs_token``: send the token at once, not after a 401)."""
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        return self._request("GET", path, needs_token=needs_token, params=clean)

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


def _detail(response: httpx.Response) -> str:
    """The daemon's reason in one line (FastAPI validation errors name the parameter)."""
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        return f"HTTP {response.status_code}: {response.text.strip()[:200]}"
    if isinstance(detail, list):
        parts = []
        for item in detail:
            where = ".".join(str(p) for p in item.get("loc", []) if p not in ("query", "body"))
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
        return "; ".join(parts) or f"HTTP {response.status_code}"
    return str(detail)
