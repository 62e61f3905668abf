"""The human tables shared by ``fleetctl check`` and ``fleetctl status``."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from daemon.cli.output import Output, severity_cell


def fmt(value: object, unit: str = "") -> str:
    """A reading with its unit, ``n/a`` when the card does not report it."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.0f}{unit}"
    return f"{value}{unit}"


def _card_row(card: dict[str, Any]) -> list[str | Text]:
    """One table row; a lost card shows dashes, not readings it cannot have."""
    if card["state"] == "lost":
        blanks = ["-"] * 5
        return [
            str(card["index"]),
            card["pci_bus_id"],
            card["name"],
            *blanks,
            str(card["xid_since_boot"]),
            severity_cell("lost"),
        ]
    gen, width = card["pcie_gen"], card["pcie_width"]
    pcie = "n/a" if gen is None else f"Gen{gen} x{fmt(width)}"
    known = card.get("clock_event_reasons") is not None
    brake = ("ACTIVE" if card["power_brake_active"] else "off") if known else "n/a"
    total = card["memory_total_mib"]
    memory = "n/a" if total is None else f"{total:,} MiB"
    return [
        str(card["index"]),
        card["pci_bus_id"],
        card["name"],
        memory,
        f"{fmt(card['power_draw_w'], ' W')} / {fmt(card['power_limit_w'], ' W')}",
        brake,
        fmt(card["temperature_c"], " C"),
        pcie,
        str(card["xid_since_boot"]),
        severity_cell(card["state"]),
    ]


def render_rig(out: Output, doc: dict[str, Any]) -> int:
    """The card table, then every check that is not ok; returns how many are not ok.

    With no card readings (NVML down, no poll yet) a line says so instead of an empty
    table; the problems below then say why.
    """
    cards = doc.get("cards", [])
    if cards:
        out.table(
            "Cards",
            ["card", "pci", "name", "memory", "power", "brake", "temp", "pcie", "xid", "state"],
            [_card_row(card) for card in cards],
        )
    else:
        out.line("cards: no readings")
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
    return len(problems)
