"""fleetctl commands answered by a running fleetd: ``status``, ``events``, ``ack``."""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, EXIT_UNKNOWN, Output, severity_cell

OVERALL_EXIT = {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}


def _fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.0f}{unit}"
    return f"{value}{unit}"


def render_status(out: Output, doc: dict[str, Any]) -> None:
    """Human status: cards, problems, engine, recovery."""
    out.table(
        "Cards",
        ["card", "pci", "memory", "power", "brake", "temp", "pcie", "xid", "state"],
        [
            [
                str(c["index"]),
                c["pci_bus_id"],
                _fmt(c["memory_total_mib"], " MiB"),
                f"{_fmt(c['power_draw_w'], ' W')} / {_fmt(c['power_limit_w'], ' W')}",
                "ACTIVE" if c["power_brake_active"] else "off",
                _fmt(c["temperature_c"], " C"),
                f"Gen{_fmt(c['pcie_gen'])} x{_fmt(c['pcie_width'])}",
                str(c["xid_since_boot"]),
                severity_cell(c["state"]),
            ]
            for c in doc.get("cards", [])
        ],
    )
    problems = [c for c in doc.get("checks", []) if c["severity"] != "ok"]
    if problems:
        out.table(
            "Problems",
            ["severity", "check", "card", "message", "remedy"],
            [
                [
                    severity_cell(c["severity"]),
                    c["id"],
                    "-" if c["card"] is None else str(c["card"]),
                    c["message"],
                    c["remedy"],
                ]
                for c in problems
            ],
        )
    serving = doc.get("serving", {})
    line = f"engine: {serving.get('state')}"
    if serving.get("pid"):
        line += f" (pid {serving['pid']})"
    line += f", restarts {serving.get('restarts', 0)}"
    if serving.get("url"):
        line += f", {serving['url']}"
    if serving.get("reason"):
        line += f" - {serving['reason']}"
    out.line(line)
    recovery = doc.get("recovery", {})
    if recovery.get("reboot_required"):
        out.line(f"REBOOT REQUIRED since {recovery.get('since')}: {recovery.get('reason')}")
        out.line(f"advice: {recovery.get('advice')}")
    out.line(f"overall: {str(doc.get('overall', 'unknown')).upper()}")


def status(out: Output, client: FleetClient) -> int:
    """``fleetctl status``: plugin exit codes; 3 when fleetd cannot be reached."""
    try:
        doc = client.get("/api/v1/status")
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN)
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
                [str(c["card"]), _fmt(c["before_w"], " W"), c["outcome"], c["detail"]]
                for c in result["cards"]
            ],
        )
    return EXIT_FAILED if any(c["outcome"] == "failed" for c in result["cards"]) else 0
