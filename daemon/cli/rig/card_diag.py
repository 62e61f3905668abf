"""``fleetctl diag pcie`` and ``diag compute``: the link and the compute units, run by fleetd.

Exit codes as the memory test's: 0 every card passed, 2 a finding (data changed in
transit, a link below what it should train at, a wrong result on an SM, a card stopped
hot), 4 refused (the engine runs: ``fleetctl stop`` first), 1 a card that could not be
tested or fleetd not reachable. One line per card (its verdict), then the findings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.text import Text

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, EXIT_REFUSED, Output
from daemon.cli.waiting import answer_while_waiting, show_elapsed

OUTCOME_STYLE = {"passed": "green", "failed": "bold red", "stopped_hot": "bold red"}
WAIT_BASE_S = 600.0  # the children's own limit (context, JIT, a slow card) plus margin


def _figure(card: dict[str, Any], kind: str) -> str:
    figures = card.get("figures") or {}
    if kind == "pcie":
        h2d = figures.get("h2d_gb_per_s_alone") or figures.get("h2d_gb_per_s_together")
        return "" if h2d is None else f"{float(h2d):.2f} GB/s ({figures.get('link', '?')})"
    checked = int(figures.get("results_checked") or 0)
    wrong = int(figures.get("results_wrong") or 0)
    return f"{wrong:,} of {checked:,} wrong" if wrong else f"{checked:,} exact"


def run(out: Output, client: FleetClient, kind: str, card: int | None, minutes: float) -> int:
    """Ask fleetd to run ``diag KIND``, wait for it (elapsed time on a terminal), print it."""
    waiting = dataclasses.replace(
        client, timeout_s=max(client.timeout_s, WAIT_BASE_S + minutes * 60)
    )
    body: dict[str, Any] = {"minutes": minutes}
    if card is not None:
        body["card"] = card
    what = "the link test" if kind == "pcie" else "the compute test"
    try:
        document: dict[str, Any] = answer_while_waiting(
            out,
            lambda: waiting.post(f"/api/v1/diag/{kind}", body),
            lambda started_s: show_elapsed(out, started_s, f"{what} running on the cards..."),
            f"fleetd finishes {what} (fleetctl events --kind diag shows it)",
        )
    except ClientError as exc:
        out.fail(str(exc), EXIT_REFUSED if exc.status == 409 else EXIT_FAILED)
    cards = list(document.get("cards") or [])
    if out.json_mode:
        out.emit_json(document)
        return int(document.get("exit_code", EXIT_FAILED))
    rows: list[list[str | Text]] = []
    for item in cards:
        outcome = str(item.get("outcome"))
        rows.append(
            [
                str(item.get("card")),
                Text(outcome, style=OUTCOME_STYLE.get(outcome, "yellow")),
                _figure(item, kind),
                str(item.get("serial") or ""),
            ]
        )
    out.table(None, ("card", "outcome", "result", "serial"), rows)
    for item in cards:
        verdict = item.get("verdict") or item.get("error")
        if verdict and item.get("outcome") != "passed":
            out.line(f"card {item.get('card')}: {verdict}")
        for finding in item.get("findings") or ():
            out.line(f"card {item.get('card')}: {finding}")
    return int(document.get("exit_code", EXIT_FAILED))
