"""The human tables shared by ``fleetctl check`` and ``fleetctl status``."""

from __future__ import annotations

from typing import Any

from daemon.cli.output import Output, severity_cell


def fmt(value: object, unit: str = "") -> str:
    """A reading with its unit, ``n/a`` when the card does not report it."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.0f}{unit}"
    return f"{value}{unit}"


def render_rig(out: Output, doc: dict[str, Any]) -> int:
    """The card table, then every check that is not ok; returns how many are not ok."""
    out.table(
        "Cards",
        ["card", "pci", "name", "memory", "power", "brake", "temp", "pcie", "xid", "state"],
        [
            [
                str(card["index"]),
                card["pci_bus_id"],
                card["name"],
                fmt(card["memory_total_mib"], " MiB"),
                f"{fmt(card['power_draw_w'], ' W')} / {fmt(card['power_limit_w'], ' W')}",
                "ACTIVE" if card["power_brake_active"] else "off",
                fmt(card["temperature_c"], " C"),
                f"Gen{fmt(card['pcie_gen'])} x{fmt(card['pcie_width'])}",
                str(card["xid_since_boot"]),
                severity_cell(card["state"]),
            ]
            for card in doc.get("cards", [])
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
    return len(problems)
