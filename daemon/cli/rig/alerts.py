"""``fleetctl alerts`` (recent alerts and their delivery) and ``fleetctl alerts test``."""

from __future__ import annotations

import time
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, Output, severity_cell
from daemon.cli.views.listview import ListColumn, short_time

TEST_POLL_S = 0.2


def _delivery_cell(alert: dict[str, Any]) -> str:
    """Per sink, the state of its newest notification (``json: delivered``).

    A card's alert sent in a board-level group says which alert's notification carried it.
    """
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
    cell = "; ".join(parts)
    return f"(with alert {alert['sent_with']}) {cell}" if alert.get("sent_with") else cell


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
    when = short_time if out.is_terminal else str  # a pipe keeps the whole ISO time
    out.table(
        None,
        [
            ListColumn("id", 3, right=True),
            ListColumn("started", 0),
            ListColumn("severity", 1),
            ListColumn("status", 2),
            ListColumn("count", 4, right=True),
            ListColumn("summary", flex=True),
            ListColumn("delivery", below=True),  # the reason this list exists: never off screen
        ],
        [
            [
                str(a["id"]),
                when(a["started_at"]),
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
    """``fleetctl alerts test``: queue a test alert; 0 once every sink answered 2xx.

    It returns as soon as each sink has either taken the alert or failed once (fleetd keeps
    retrying a failed one in the background): a dead webhook is a line with its error at
    once, not a wait for the whole ``--timeout``, which bounds only sinks still silent.
    """
    try:
        alert = client.post("/api/v1/alerts/test", {"sink": sink} if sink else {})
        deadline = time.monotonic() + wait_s
        while not _answered(alert) and time.monotonic() < deadline:
            time.sleep(TEST_POLL_S)
            alert = client.get(f"/api/v1/alerts/{alert['id']}")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    delivered = all(n["state"] == "delivered" for n in alert["deliveries"])
    if out.json_mode:
        out.emit_json(alert)
    else:
        for note in alert["deliveries"]:
            out.line(test_line(note, wait_s))
    return 0 if delivered else EXIT_FAILED


def test_line(note: dict[str, Any], wait_s: float) -> str:
    """One sink's outcome: delivered, its last error, or no answer within the wait."""
    sink, state = note["sink"], note["state"]
    if state == "delivered":
        return f"{sink}: delivered"
    error = note.get("last_error") or "no error recorded"
    blocked = note.get("blocked_by")
    if state == "pending" and blocked:
        return (
            f"{sink}: failed: {blocked['last_error']} (the test waits behind "
            f"{blocked['queued_before']} older notifications; fleetd keeps retrying)"
        )
    if state == "retrying":
        return f"{sink}: failed: {error} (fleetd keeps retrying it with backoff)"
    if state == "gave_up":
        return f"{sink}: gave up: {error}"
    return f"{sink}: no answer within {wait_s:g} s (still pending; fleetd keeps trying)"


def _answered(alert: dict[str, Any]) -> bool:
    """Every sink took the test alert or failed at least once (itself, or what it waits on)."""
    return all(
        n["state"] in ("delivered", "gave_up", "retrying") or n.get("blocked_by")
        for n in alert["deliveries"]
    )
