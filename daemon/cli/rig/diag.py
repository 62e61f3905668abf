"""``fleetctl diag memtest``: the memory test, run on the cards by fleetd with the engine stopped.

Exit codes: 0 every card clean, 2 errors found (naming the cards) or an unknown pattern
(one line naming the known ones), 4 refused (the engine runs: ``fleetctl stop`` first), 1
anything else (a test already running, a card that could not be tested, a planted
self-test fault not found, fleetd not reachable), each with one line. On a terminal a
progress line shows each card's pattern, pass and sweep (asked of fleetd once a second);
into a pipe nothing but the result. The command itself is declared in ``daemon.cli.app``
(which imports this module only when it runs).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from rich.text import Text

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, Output
from daemon.cli.waiting import answer_while_waiting, show_elapsed
from hwcheck.memtest.children import timeout_s
from hwcheck.memtest.patterns import UnknownPattern, parse_patterns
from hwcheck.memtest.results import MemtestPlan, MemtestProgress

OUTCOME_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "timed_out": "bold red",
    "stopped_hot": "bold red",
}
PROGRESS_TIMEOUT_S = 2.0
WAIT_MARGIN_S = 60.0
MAP_BLOCKS_SHOWN = 12
COLUMNS = (
    "card", "pci", "outcome", "tested", "GiB/s", "bit errors", "bad words", "failed blocks",
    "first error", "error", "time",
)  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class MemtestArgs:
    """The command's flags (``patterns``: the comma-separated text as typed)."""

    cards: tuple[int, ...] | None = None  # None: every card
    gib: float | None = None
    patterns: str | None = None
    passes: int = 1
    minutes: float = 0.0
    inject: bool = False
    seed: int | None = None


def _row(card: dict[str, Any]) -> list[str | Text]:
    outcome = str(card.get("outcome"))
    offset = card.get("first_error_offset")
    failed = int(card.get("blocks_failed") or 0)
    return [
        str(card.get("card")),
        str(card.get("pci_bus_id") or ""),
        Text(outcome, style=OUTCOME_STYLE.get(outcome, "yellow")),
        f"{int(card.get('tested_mib') or 0):,} MiB",
        f"{float(card.get('gib_per_s') or 0):,.0f}",
        f"{int(card.get('bit_errors') or 0):,}",
        f"{int(card.get('bad_words') or 0):,}",
        f"{failed:,} of {int(card.get('blocks_tested') or 0):,}" if failed else "",
        "" if offset is None else f"{int(offset):#x} ({card.get('pattern')})",
        str(card.get("error") or ""),
        f"{float(card.get('duration_s') or 0):.1f} s",
    ]


def block_map_line(card: dict[str, Any]) -> str:
    """``blocks (2 MiB): #5 x1, #9 x2, #12 x2`` (the first few; the count says how many)."""
    kib = int(card.get("block_kib") or 2048)
    size = f"{kib // 1024} MiB" if kib % 1024 == 0 else f"{kib} KiB"
    blocks = [(int(b), int(n)) for b, n in card.get("blocks") or ()]
    shown = ", ".join(f"#{block} x{count:,}" for block, count in blocks[:MAP_BLOCKS_SHOWN])
    failed = int(card.get("blocks_failed") or len(blocks))
    more = f" (and {failed - MAP_BLOCKS_SHOWN:,} more)" if failed > MAP_BLOCKS_SHOWN else ""
    return f"failed blocks ({size}): {shown}{more}"


def _run_row(run: dict[str, Any]) -> list[str | Text]:
    first = (run.get("first_bad") or [None])[0]
    where = ""
    if isinstance(first, dict):
        where = (
            f"{int(first['offset']):#x}: {int(first['expected']):08x} read {int(first['got']):08x}"
        )
    name = str(run.get("pattern"))
    if name == "stress":
        name = f"stress ({int(run.get('cycles') or 0):,} cycles)"
    return [
        name,
        str(run.get("pass_number")),
        f"{int(run.get('bad_words') or 0):,}",
        f"{int(run.get('bit_errors') or 0):,}",
        f"{int(run.get('zero_bursts') or 0):,}",
        f"{int(run.get('blocks_failed') or 0):,}",
        f"{float(run.get('gib_per_s') or 0):,.0f}",
        where,
    ]


def _details(out: Output, card: dict[str, Any]) -> None:
    """A failing card's verdict, block map and per-pattern findings."""
    out.line(f"card {card.get('card')}: {card.get('verdict') or 'errors found'}")
    out.line("  " + block_map_line(card))
    runs = [run for run in card.get("runs") or () if int(run.get("bad_words") or 0)]
    out.table(
        None,
        ["pattern", "pass", "bad words", "bit errors", "zero bursts", "blocks", "GiB/s", "first"],
        [_run_row(run) for run in runs],
    )


def _progress_text(client: FleetClient) -> str:
    try:
        overview = client.get("/api/v1/diag/memtest")
    except ClientError:
        overview = {}
    lines = []
    for item in (overview or {}).get("progress") or ():
        try:
            lines.append(MemtestProgress.from_dict(int(item["card"]), item).line())
        except (KeyError, TypeError, ValueError):
            continue
    return " | ".join(lines) or "memory test running on the cards..."


def planted_lines(cards: list[dict[str, Any]]) -> list[str]:
    """``--inject``'s self-test per card: the faults planted and found (left out of the counts).

    Without these a person saw a clean table and no word of the self-test they asked for.
    """
    lines = []
    for card in cards:
        planted = int(card.get("planted") or 0)
        if not planted:
            continue
        found = int(card.get("planted_found") or 0)
        verdict = "the test sees faults" if found == planted else "NOT ALL FOUND: do not trust it"
        lines.append(
            f"card {card.get('card')}: self-test: {found} of {planted} planted faults found "
            f"({verdict}; left out of the counts)"
        )
    return lines


def plan_of(args: MemtestArgs, patterns: tuple[str, ...]) -> MemtestPlan:
    """The plan the flags ask for (its size for the wait: ``--gib``, else the largest card)."""
    mib = None if args.gib is None else max(int(args.gib * 1024), 1)
    return MemtestPlan(mib, patterns, args.passes, args.minutes * 60, args.inject)


def run_memtest(out: Output, client: FleetClient, args: MemtestArgs) -> int:
    """Ask fleetd to run the memory test, wait for it (progress on a terminal), print the result."""
    try:
        patterns = parse_patterns(args.patterns)
    except UnknownPattern as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    plan = plan_of(args, patterns)
    waiting = dataclasses.replace(
        client, timeout_s=max(client.timeout_s, timeout_s(plan) + WAIT_MARGIN_S)
    )
    asking = dataclasses.replace(client, timeout_s=PROGRESS_TIMEOUT_S)
    body: dict[str, Any] = {
        "patterns": list(patterns),
        "passes": args.passes,
        "minutes": args.minutes,
        "inject": args.inject,
    }
    if args.cards is not None:
        body["cards"] = list(args.cards)
    for key in ("gib", "seed"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)

    def tick(started_s: float) -> None:
        if sys.stderr.isatty():  # a person watches: ask fleetd where each card is
            show_elapsed(out, started_s, _progress_text(asking))

    try:
        document: dict[str, Any] = answer_while_waiting(
            out,
            lambda: waiting.post("/api/v1/diag/memtest", body),
            tick,
            "fleetd finishes the memory test (fleetctl events --kind diag shows it)",
        )
    except ClientError as exc:
        out.fail(str(exc), EXIT_REFUSED if exc.status == 409 else EXIT_FAILED)
    cards = list(document.get("cards") or [])
    if out.json_mode:
        out.emit_json(document)
    else:
        out.table(None, COLUMNS, [_row(c) for c in cards])
        for card in cards:
            if int(card.get("bad_words") or 0):
                _details(out, card)
        for line in planted_lines(cards):
            out.line(line)
        out.line(str(document.get("message", "")))
    return int(document.get("exit_code", EXIT_FAILED))
