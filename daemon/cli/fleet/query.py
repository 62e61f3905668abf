"""Ask every rig of the fleet for its status at once, each answer bounded by one deadline.

All rigs are asked concurrently (one asyncio task each, one HTTP client) so twenty rigs
cost one round trip, and the whole poll is cancelled at ``timeout_s``: a rig that hangs
(a wedged host, a black-holed network) becomes UNKNOWN with the reason instead of holding
the command. The token rules are the single-rig client's: a GET goes without the token,
and again with it only when the daemon asks (401); a local state dir's token never
travels to another host.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from daemon.cli.client import ClientError, locate_token
from daemon.cli.fleet.file import Rig

STATUS_PATH = "/api/v1/status"
DEFAULT_TIMEOUT_S = 5.0
# Worst first when a fleet is summed up: a critical rig is never hidden behind a rig that
# did not answer, and a rig that did not answer outranks a warning (it may be critical).
OVERALL_RANK = {"ok": 0, "warning": 1, "unknown": 2, "critical": 3}
OVERALL_EXIT = {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}


@dataclass(frozen=True)
class RigReading:
    """One rig's answer: its status document, or why there is none."""

    rig: Rig
    status: dict[str, Any] | None
    error: str | None
    elapsed_s: float


@dataclass(frozen=True)
class RigSummary:
    """The row ``fleet status`` prints for one rig (and its JSON)."""

    rig: str
    url: str
    overall: str
    cards_ok: int | None
    cards_total: int | None
    engine_state: str | None
    tokens_per_s: float | None
    reboot_required: bool | None
    reboot_reason: str | None
    error: str | None
    detail: str

    @classmethod
    def of(cls, reading: RigReading) -> RigSummary:
        """Sum one reading up; a rig with no document is UNKNOWN with the error."""
        doc = reading.status
        if doc is None:
            return cls(
                rig=reading.rig.name,
                url=reading.rig.url,
                overall="unknown",
                cards_ok=None,
                cards_total=None,
                engine_state=None,
                tokens_per_s=None,
                reboot_required=None,
                reboot_reason=None,
                error=reading.error,
                detail=reading.error or "",
            )
        cards = doc.get("cards") or []
        serving = doc.get("serving") or {}
        recovery = doc.get("recovery") or {}
        metrics = serving.get("metrics") or {}
        overall = str(doc.get("overall", "unknown"))
        return cls(
            rig=reading.rig.name,
            url=reading.rig.url,
            overall=overall if overall in OVERALL_RANK else "unknown",
            cards_ok=sum(1 for card in cards if card.get("state") == "ok"),
            cards_total=len(cards),
            engine_state=serving.get("state"),
            tokens_per_s=metrics.get("generation_tokens_per_s"),
            reboot_required=bool(recovery.get("reboot_required")),
            reboot_reason=recovery.get("reason"),
            error=None,
            detail=_detail(doc),
        )


def _detail(doc: dict[str, Any]) -> str:
    """Why a rig is not OK, in a few words: latch, drain, stale picture, else the worst check."""
    recovery = doc.get("recovery") or {}
    if recovery.get("reboot_required"):
        return f"reboot required: {recovery.get('reason') or 'no reason given'}"
    drain = doc.get("drain") or {}
    if drain.get("draining"):  # out of its load balancer: why, before any warning
        return f"draining: {drain.get('reason') or 'by ' + str(drain.get('by'))}"
    stale = (doc.get("rig") or {}).get("stale_reason")
    if stale:
        return f"stale: {stale}"
    for severity in ("critical", "warning"):
        for check in doc.get("checks") or []:
            if check.get("severity") == severity:
                return f"{check.get('id')}: {check.get('message')}"
    return ""


def worst(overalls: list[str]) -> str:
    """The fleet's verdict: the worst rig's (``unknown`` for an empty fleet)."""
    if not overalls:
        return "unknown"
    return max(overalls, key=lambda overall: OVERALL_RANK.get(overall, OVERALL_RANK["unknown"]))


def poll_fleet(rigs: list[Rig], timeout_s: float = DEFAULT_TIMEOUT_S) -> list[RigReading]:
    """Every rig's status, in the fleet file's order, within about ``timeout_s``."""
    return asyncio.run(_poll(rigs, timeout_s))


async def _poll(rigs: list[Rig], timeout_s: float) -> list[RigReading]:
    timeout = httpx.Timeout(timeout_s)
    async with httpx.AsyncClient(timeout=timeout) as client:
        return list(await asyncio.gather(*(_read(client, rig, timeout_s) for rig in rigs)))


async def _read(client: httpx.AsyncClient, rig: Rig, timeout_s: float) -> RigReading:
    """One rig, never raising: every failure becomes the reading's error."""
    started = time.monotonic()
    try:
        status = await asyncio.wait_for(_status(client, rig), timeout_s)
    except TimeoutError:
        error = f"no answer from {rig.url} within {timeout_s:g} s"
        return RigReading(rig, None, error, time.monotonic() - started)
    except ClientError as exc:
        return RigReading(rig, None, str(exc), time.monotonic() - started)
    return RigReading(rig, status, None, time.monotonic() - started)


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


async def _status(client: httpx.AsyncClient, rig: Rig) -> dict[str, Any]:
    """``GET /api/v1/status`` with the token only when asked for; errors as ClientError."""
    token = locate_token(rig.token_file, rig.url, file_origin=f"rigs.{rig.name}.token_file")
    url = rig.url + STATUS_PATH
    try:
        response = await client.get(url)
        if response.status_code == 401 and token:
            response = await client.get(url, headers={"Authorization": f"Bearer {token.value}"})
    except httpx.HTTPError as exc:
        reason = unreachable_reason(exc, client.timeout.read or 0.0)
        raise ClientError(f"cannot reach fleetd at {rig.url}: {reason}", unreachable=True) from None
    if response.status_code == 401:
        raise ClientError(f"fleetd wants a token: set rigs.{rig.name}.token_file", status=401)
    if response.status_code == 403:
        where = "the token" if token is None else f"the token from {token.source}"
        raise ClientError(f"fleetd refused {where}", status=403)
    if response.status_code != 200:
        status = response.status_code
        raise ClientError(f"{url} answered HTTP {status}", status=status)
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or "overall" not in doc:
        raise ClientError(f"{url} did not answer a fleetd status document (is it fleetd?)")
    return doc
