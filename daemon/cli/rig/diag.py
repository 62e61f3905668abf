"""``fleetctl diag memtest``: the memory test, run by fleetd with the engine stopped.

Exit codes: 0 every card clean, 2 errors found (naming the cards), 4 refused (the engine
runs: ``fleetctl stop`` first), 1 anything else (a test already running, a card that
could not be tested, fleetd not reachable), each with one line. The command itself is
declared in ``daemon.cli.app`` (which imports this module only when it runs).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.text import Text

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_FAILED, EXIT_REFUSED, Output
from daemon.cli.waiting import answer_while_waiting, show_elapsed
from hwcheck.memtest import timeout_s

# fleetd bounds each card's test itself; fleetctl waits for the most cards a rig has.
MAX_CARDS = 16
OUTCOME_STYLE = {"passed": "green", "failed": "bold red", "timed_out": "bold red"}


def _row(card: dict[str, Any]) -> list[str | Text]:
    outcome = str(card.get("outcome"))
    offset = card.get("first_error_offset")
    return [
        str(card.get("card")),
        str(card.get("pci_bus_id") or ""),
        Text(outcome, style=OUTCOME_STYLE.get(outcome, "yellow")),
        f"{int(card.get('tested_mib') or 0):,} MiB",
        f"{int(card.get('bit_errors') or 0):,}",
        "" if offset is None else f"{int(offset):#x} ({card.get('pattern')})",
        str(card.get("error") or ""),
        f"{float(card.get('duration_s') or 0):.1f} s",
    ]


def run_memtest(out: Output, client: FleetClient, card: int | None, gib: float) -> int:
    """Ask fleetd to run the memory test, wait for it, print each card's result."""
    wait_s = MAX_CARDS * timeout_s(int(gib * 1024)) + 60
    client = dataclasses.replace(client, timeout_s=max(client.timeout_s, wait_s))
    body: dict[str, Any] = {"gib": gib} if card is None else {"gib": gib, "card": card}
    try:
        document: dict[str, Any] = answer_while_waiting(
            out,
            lambda: client.post("/api/v1/diag/memtest", body),
            lambda started_s: show_elapsed(out, started_s, "memory test running on the cards..."),
            "fleetd finishes the memory test (fleetctl events --kind diag shows it)",
        )
    except ClientError as exc:
        out.fail(str(exc), EXIT_REFUSED if exc.status == 409 else EXIT_FAILED)
    cards = list(document.get("cards") or [])
    if out.json_mode:
        out.emit_json(document)
    else:
        out.table(
            None,
            ["card", "pci", "outcome", "tested", "bit errors", "first error", "error", "time"],
            [_row(c) for c in cards],
        )
        out.line(str(document.get("message", "")))
    return int(document.get("exit_code", EXIT_FAILED))
