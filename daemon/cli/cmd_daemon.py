"""fleetctl commands answered by a running fleetd: ``status``, ``events``, ``ack``."""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, EXIT_UNKNOWN, Output, severity_cell
from daemon.cli.render import fmt, render_rig

OVERALL_EXIT = {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}


def render_status(out: Output, doc: dict[str, Any]) -> None:
    """Human status: cards, problems, engine, recovery."""
    render_rig(out, doc)
    serving = doc.get("serving", {})
    line = f"engine: {serving.get('state')}"
    if serving.get("pid"):
        line += f" (pid {serving['pid']})"
    line += f", restarts {serving.get('restarts', 0)}"
    if serving.get("url"):
        line += f", {serving['url']}"
    if serving.get("profile"):
        line += f", profile {serving['profile']}"
    if serving.get("reason"):
        line += f" - {serving['reason']}"
    out.line(line)
    drift = serving.get("drift")
    if drift:  # an engine of another recipe runs un-adopted: `fleetctl start` says what to do
        line = f"DRIFT: pid {drift.get('pid')} at {drift.get('url')} runs another recipe"
        out.line(line + " (left running; see fleetctl start)")
    recovery = doc.get("recovery", {})
    if recovery.get("reboot_required"):
        out.line(f"REBOOT REQUIRED since {recovery.get('since')}: {recovery.get('reason')}")
        out.line(f"advice: {recovery.get('advice')}")
    stale = (doc.get("rig") or {}).get("stale_reason")
    if stale:
        out.line(f"STALE: {stale}")
    out.line(f"overall: {str(doc.get('overall', 'unknown')).upper()}")


def status(out: Output, client: FleetClient) -> int:
    """``fleetctl status``: plugin exit codes; 3 when fleetd cannot be reached."""
    try:
        doc = client.status()
    except ClientError as exc:
        out.fail_unknown(str(exc))
    if out.json_mode:
        out.emit_json(doc)
    else:
        render_status(out, doc)
    return OVERALL_EXIT.get(str(doc.get("overall")), EXIT_UNKNOWN)


def events(
    out: Output, client: FleetClient, since: str | None, kind: str | None, limit: int
) -> int:
    """``fleetctl events``: newest first."""
    try:
        rows = client.get("/api/v1/events", {"since": since, "kind": kind, "limit": limit})
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(rows)
        return 0
    if not rows:
        out.line("no events")
        return 0
    out.table(
        None,
        ["id", "time", "kind", "severity", "card", "xid", "message"],
        [
            [
                str(r["id"]),
                r["ts"],
                r["kind"],
                severity_cell(r["severity"]),
                "-" if r["card"] is None else str(r["card"]),
                "-" if r["xid"] is None else str(r["xid"]),
                r["message"] + (" (acked)" if r.get("acked") else ""),
            ]
            for r in rows
        ],
    )
    return 0


def ack(out: Output, client: FleetClient, event_id: int) -> int:
    """``fleetctl ack ID``."""
    try:
        result = client.post(f"/api/v1/events/{event_id}/ack")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(result)
    else:
        out.line(f"event {event_id} acknowledged")
    return 0


def caps_apply(out: Output, client: FleetClient) -> int:
    """``fleetctl caps apply``: fleetd re-applies the cap now; 1 if any card failed."""
    try:
        result = client.post("/api/v1/caps/apply")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(result)
    else:
        out.table(
            f"Power cap {result['target_w']:.0f} W",
            ["card", "before", "outcome", "detail"],
            [
                [str(c["card"]), fmt(c["before_w"], " W"), c["outcome"], c["detail"]]
                for c in result["cards"]
            ],
        )
    return EXIT_FAILED if any(c["outcome"] == "failed" for c in result["cards"]) else 0
