"""``fleetctl drain [--grace-s N] [--reason TEXT]`` and ``fleetctl undrain``.

A drain makes the rig's guard answer ``/health`` and every new request with a 503
``draining`` (``Retry-After``), so a load balancer in front of several rigs sends the
traffic elsewhere; requests already running finish within the grace. It lasts, across
fleetd restarts, until ``undrain`` (a confirmed reboot's own drain ends after the boot).
Both answer at once with the drain's state (``--json``: the status's ``drain`` block).
"""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, Output


def _post(out: Output, client: FleetClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        result: dict[str, Any] = client.post(path, body)
    except ClientError as exc:
        if exc.status == 409:
            out.fail(f"refused: {exc}", EXIT_REFUSED)
        if exc.status in (400, 422):
            out.fail(str(exc), EXIT_BAD_INPUT)
        out.fail(str(exc), EXIT_FAILED)
    return result


def describe(document: dict[str, Any]) -> str:
    """The drain in one line (``fleetctl status`` and these commands)."""
    if not document.get("draining"):
        return "not draining: the guard serves"
    running = document.get("in_flight")
    quiet = (
        "quiet"
        if document.get("quiet")
        else f"{running} running"
        if running is not None
        else "no guard"
    )
    why = f" ({document['reason']})" if document.get("reason") else ""
    return (
        f"draining since {document.get('since')} by {document.get('by')}{why}: "
        f"{quiet}, grace {document.get('grace_left_s')} s left of {document.get('grace_s')} s"
    )


def drain(out: Output, client: FleetClient, grace_s: float | None, reason: str) -> int:
    """``fleetctl drain``: begin (or renew) the drain."""
    body: dict[str, Any] = {"reason": reason}
    if grace_s is not None:
        body["grace_s"] = grace_s
    result = _post(out, client, "/api/v1/drain", body)
    if out.json_mode:
        out.emit_json(result)
    else:
        out.line(describe(result))
        out.line("the guard's /health answers 503 draining; `fleetctl undrain` ends it")
    return 0


def undrain(out: Output, client: FleetClient) -> int:
    """``fleetctl undrain``: end the drain."""
    result = _post(out, client, "/api/v1/undrain", {})
    if out.json_mode:
        out.emit_json(result)
    else:
        out.line(describe(result))
    return 0
