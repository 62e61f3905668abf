"""``fleetctl alerts`` (recent alerts and their delivery) and ``fleetctl alerts test``."""

from __future__ import annotations

import time
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, Output, severity_cell

TEST_POLL_S = 0.2


def _delivery_cell(alert: dict[str, Any]) -> str:
    """Per sink, the state of its newest notification (``json: delivered``)."""
    newest: dict[str, dict[str, Any]] = {}
    for note in alert.get("deliveries", []):
        newest[note["sink"]] = note
    if not newest:
        return "-"
    parts = []
    for sink, note in newest.items():
        text = f"{sink}: {note['state']}"
        if note["state"] in ("retrying", "gave_up") and note.get("last_error"):
            text += f" ({note['attempts']} tries, {note['last_error']})"
        parts.append(text)
    return "; ".join(parts)


def render_sinks(out: Output, sinks: list[dict[str, Any]]) -> None:
    """One line per configured webhook."""
    if not sinks:
        out.line("no webhooks configured ([[alerts.webhooks]] in fleet.toml): alerts are kept here")
    for sink in sinks:
        signed = "signed" if sink["signed"] else "unsigned"
        out.line(
            f"sink {sink['name']}: {sink['format']} {sink['url']} ({signed}, "
            f"min {sink['min_severity']}, {sink['pending']} waiting)"
        )


def list_alerts(out: Output, client: FleetClient, limit: int, status: str | None) -> int:
    """``fleetctl alerts``: newest first with their delivery state."""
    try:
        doc = client.get("/api/v1/alerts", {"limit": limit, "status": status})
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(doc)
        return 0
    render_sinks(out, doc["sinks"])
    if not doc["alerts"]:
        out.line("no alerts")
        return 0
    out.table(
        None,
        ["id", "started", "severity", "status", "count", "summary", "delivery"],
        [
            [
                str(a["id"]),
                a["started_at"],
                severity_cell(a["severity"]),
                a["status"],
                str(a["count"]),
                a["summary"],
                _delivery_cell(a),
            ]
            for a in doc["alerts"]
        ],
    )
    return 0


def send_test(out: Output, client: FleetClient, sink: str | None, wait_s: float) -> int:
    """``fleetctl alerts test``: queue a test alert, wait for its delivery (0 when delivered)."""
    try:
        alert = client.post("/api/v1/alerts/test", {"sink": sink} if sink else {})
        deadline = time.monotonic() + wait_s
        while not _settled(alert) and time.monotonic() < deadline:
            time.sleep(TEST_POLL_S)
            alert = client.get(f"/api/v1/alerts/{alert['id']}")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    delivered = all(n["state"] == "delivered" for n in alert["deliveries"])
    if out.json_mode:
        out.emit_json(alert)
    else:
        for note in alert["deliveries"]:
            line = f"{note['sink']}: {note['state']}"
            if note["state"] != "delivered":
                line += f" after {note['attempts']} tries"
                if note.get("last_error"):
                    line += f": {note['last_error']}"
            out.line(line)
    return 0 if delivered else EXIT_FAILED


def _settled(alert: dict[str, Any]) -> bool:
    return all(n["state"] in ("delivered", "gave_up") for n in alert["deliveries"])
