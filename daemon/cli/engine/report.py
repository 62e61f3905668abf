"""``fleetctl report``: the confirmation report, one self-contained HTML file (or ``--json``).

fleetd builds the facts (``GET /api/v1/report``: no secret, no host name unless asked);
this renders them (``daemon.bench.report_html``) and writes the file 0644: a report is
made to be shared, and it holds nothing private.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.bench.report_html import render_report
from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, EXIT_REFUSED, EXIT_UNKNOWN, Output

DEFAULT_OUTPUT = Path("cmpfleet-report.html")


def run(out: Output, client: FleetClient, output: Path | None, with_hostname: bool) -> int:
    """Fetch the facts; print them (``--json``) or write the HTML file."""
    try:
        document: dict[str, Any] = client.get(
            "/api/v1/report", {"with_hostname": "true" if with_hostname else None}, needs_token=True
        )
    except ClientError as exc:
        out.fail(
            str(exc),
            EXIT_UNKNOWN if exc.unreachable else EXIT_REFUSED if exc.status == 409 else EXIT_FAILED,
        )
    if out.json_mode and output is None:
        out.emit_json(document)
        return 0
    path = output or DEFAULT_OUTPUT
    try:
        path.write_text(render_report(document), encoding="utf-8")
    except OSError as exc:
        out.fail(f"cannot write {path}: {exc.strerror or exc}", EXIT_FAILED)
    if out.json_mode:
        out.emit_json({"output": str(path), **document})
    else:
        out.line(f"report written to {path} (no secret in it; open it in a browser)")
    return 0
