"""What ``fleetctl top`` draws for one rig: its status document as one rich renderable.

``rig_view(doc)`` is pure (a document in, a renderable out) so any live view can reuse it:
``fleetctl top`` for one daemon, a fleet view for a rig picked out of many. It reads
only the status document's keys and treats every extra block as optional (``recovery``'s
decisions and bring-up, ``serving.metrics``, ``rig``), so a newer or older daemon still
draws. Readings a card does not report show ``n/a``; a lost card shows dashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from daemon.cli.cmd_canary import RESULT_STYLE, figure_text
from daemon.cli.output import SEVERITY_STYLE, severity_cell
from daemon.cli.render import fmt

CARD_COLUMNS = (
    "card", "pci", "memory", "power / cap", "brake", "temp", "pcie", "sm clock", "xid", "state",
)  # fmt: skip
MAX_DECISIONS = 3


@dataclass(frozen=True)
class ViewSource:
    """Where the picture comes from and whether it is live (for the header)."""

    url: str
    error: str | None = None  # the last refresh failed: the picture below is the last seen
    seen_at: datetime | None = None  # when the picture below was fetched


def _cell(value: str, style: str = "") -> Text:
    return Text(value, style=style)


def _age(since: str | None, now: datetime) -> str:
    """``1h02m`` since an ISO time (``n/a`` when unknown)."""
    if not since:
        return "n/a"
    try:
        seconds = int((now - datetime.fromisoformat(since)).total_seconds())
    except ValueError:
        return "n/a"
    hours, rest = divmod(max(seconds, 0), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _rate(value: float | None) -> str:
    """Tokens per second to a tenth (``n/a`` until the engine reports it)."""
    return "n/a" if value is None else f"{value:.1f}"


def unlock_verdicts(checks: list[dict[str, Any]]) -> dict[int, str]:
    """Card index -> severity of its ``vram_unlocked`` check."""
    return {
        int(c["card"]): str(c["severity"])
        for c in checks
        if c.get("id") == "vram_unlocked" and c.get("card") is not None
    }


def _memory_cell(card: dict[str, Any], verdict: str | None) -> Text:
    total = card.get("memory_total_mib")
    size = "n/a" if total is None else f"{total:,} MiB"
    if verdict == "ok":
        return _cell(f"unlocked {size}", "green")
    if verdict == "critical":
        return _cell(f"LOCKED {size}", "bold red")
    return _cell(size, SEVERITY_STYLE.get(verdict or "", ""))


def _power_cell(card: dict[str, Any]) -> str:
    return f"{fmt(card.get('power_draw_w'), ' W')} / {fmt(card.get('power_limit_w'), ' W')}"


def _pcie_cell(card: dict[str, Any]) -> Text:
    gen, width = card.get("pcie_gen"), card.get("pcie_width")
    if gen is None:
        return _cell("n/a")
    link = f"Gen{gen} x{fmt(width)}"
    gen_max, width_max = card.get("pcie_gen_max"), card.get("pcie_width_max")
    if gen_max is None or width_max is None:
        return _cell(link)
    if gen < gen_max or (width is not None and width < width_max):
        return _cell(f"{link} of Gen{gen_max} x{width_max}", "yellow")
    return _cell(link)


def card_cells(card: dict[str, Any], verdict: str | None) -> list[str | Text]:
    """One card's cells under ``CARD_COLUMNS`` (``verdict``: its ``vram_unlocked`` severity)."""
    index, pci = str(card["index"]), str(card["pci_bus_id"])
    xids = int(card.get("xid_since_boot") or 0)
    xid_cell = _cell(str(xids), "bold red" if xids else "")
    if card.get("state") == "lost":
        reason = card.get("lost_reason") or "GPU lost"
        return [index, pci, *["-"] * 6, xid_cell, _cell(f"LOST: {reason}", "bold red")]
    known = card.get("clock_event_reasons") is not None
    brake = card.get("power_brake_active")
    brake_cell = _cell("ACTIVE", "bold red") if brake else _cell("off" if known else "n/a")
    clock = card.get("sm_clock_mhz")
    return [
        index,
        pci,
        _memory_cell(card, verdict),
        _power_cell(card),
        brake_cell,
        fmt(card.get("temperature_c"), " C"),
        _pcie_cell(card),
        "n/a" if clock is None else f"{clock} MHz",
        xid_cell,
        severity_cell(str(card.get("state", "unknown"))),
    ]


def cards_table(doc: dict[str, Any]) -> RenderableType:
    """One row per card; a line instead when there are no readings."""
    cards: list[dict[str, Any]] = doc.get("cards") or []
    if not cards:
        return Text("cards: no readings", style=SEVERITY_STYLE["unknown"])
    verdicts = unlock_verdicts(doc.get("checks") or [])
    table = Table(title="Cards", title_justify="left", show_edge=False, pad_edge=False)
    for column in CARD_COLUMNS:
        table.add_column(column, overflow="fold")
    for card in cards:
        table.add_row(*card_cells(card, verdicts.get(int(card["index"]))))
    return table


def engine_panel(serving: dict[str, Any], now: datetime) -> RenderableType:
    """State, uptime, load and restarts of the engine."""
    state = str(serving.get("state", "unknown"))
    style = {"ready": "green", "starting": "cyan", "stopped": "", "stopping": "cyan"}.get(
        state, "bold red"
    )
    line = Text.assemble(("engine ", "bold"), (state.upper(), style))
    if state == "ready":
        line.append(f"  up {_age(serving.get('since'), now)}")
    elif serving.get("since"):
        line.append(f"  since {_age(serving.get('since'), now)} ago")
    if serving.get("pid") is not None:
        line.append(f"  pid {serving['pid']}")
    line.append(f"  restarts {serving.get('restarts', 0)}")
    remaining = serving.get("backoff_remaining_s")
    if remaining is not None:
        line.append(f"  next try in {remaining:.0f} s", style="yellow")
    metrics = serving.get("metrics") or {}
    load = Text(
        f"tokens/s {_rate(metrics.get('generation_tokens_per_s'))}"
        f"  running {fmt(metrics.get('requests_running'))}"
        f"  waiting {fmt(metrics.get('requests_waiting'))}"
        f"  kv cache {fmt(metrics.get('kv_cache_usage_pct'), '%')}"
    )
    lines: list[RenderableType] = [line, load]
    if serving.get("reason") and state != "ready":
        lines.append(Text(f"why: {serving['reason']}"))
    if serving.get("crash_class"):
        lines.append(Text(f"last crash: {serving['crash_class']}", style="yellow"))
    return Group(*lines)


def recovery_panel(recovery: dict[str, Any]) -> RenderableType | None:
    """The reboot prompt while the latch is set; the last decisions when there are any."""
    lines: list[RenderableType] = []
    if recovery.get("reboot_required"):
        lines.append(Text("REBOOT REQUIRED", style="bold red"))
        lines.append(Text(f"reason: {recovery.get('reason') or 'n/a'}"))
        if recovery.get("since"):
            lines.append(Text(f"since:  {recovery['since']}"))
        lines.append(Text(f"advice: {recovery.get('advice') or 'n/a'}", style="bold"))
    decisions: list[dict[str, Any]] = recovery.get("decisions") or []
    for decision in decisions[:MAX_DECISIONS]:
        mark = " (dry run)" if decision.get("dry_run") else ""
        lines.append(
            Text(
                f"{decision.get('ts', '')}  {decision.get('action', '?')} -> "
                f"{decision.get('outcome', '?')}{mark}: {decision.get('reason') or ''}",
                style="dim",
                no_wrap=True,  # one row per decision: the checks below stay on screen
                overflow="ellipsis",
            )
        )
    bring_up = recovery.get("bring_up")
    if isinstance(bring_up, dict) and bring_up.get("summary"):
        lines.append(Text(f"last bring-up: {bring_up['summary']}", style="dim"))
    if not lines:
        return None
    latched = bool(recovery.get("reboot_required"))
    return Panel(
        Group(*lines),
        title="recovery",
        title_align="left",
        border_style="red" if latched else "dim",
        expand=False,
    )


def checks_view(checks: list[dict[str, Any]]) -> RenderableType:
    """Every check that is not ok with its remedy, or one line saying all pass."""
    problems = [c for c in checks if c.get("severity") != "ok"]
    if not problems:
        return Text(f"checks: all {len(checks)} ok", style="green")
    table = Table(title="Checks", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("severity", "check", "card", "message", "remedy"):
        table.add_column(column, overflow="fold")
    for check in problems:
        card = check.get("card")
        table.add_row(
            severity_cell(str(check["severity"])),
            str(check["id"]),
            "-" if card is None else str(card),
            str(check.get("message", "")),
            str(check.get("remedy", "")),
        )
    return table


def canaries_view(
    canaries: list[dict[str, Any]], signatures: list[dict[str, Any]], now: datetime
) -> RenderableType:
    """One line of canary verdicts; each warning or failure's figure and advice below it.

    The engine log signatures seen this hour follow on one line when there are any.
    """
    line = Text("canaries:", style="bold")
    lines: list[RenderableType] = [line]
    for canary in canaries:
        result = str(canary.get("result", "skipped"))
        shown = result.upper() if result in ("warn", "fail") else result
        line.append(f" {canary.get('name', '?')} ")
        line.append(shown, style=RESULT_STYLE.get(result, ""))
        line.append(" ")
        if result in ("warn", "fail"):
            lines.append(
                Text(
                    f"  {canary.get('name', '?')} {figure_text(canary)}"
                    f" ({_age(canary.get('ts'), now)} ago): {canary.get('advice') or ''}",
                    style=RESULT_STYLE[result],
                )
            )
    seen = [s for s in signatures if s.get("this_hour")]
    if seen:
        counts = "  ".join(f"{s.get('name')} {s.get('this_hour')}" for s in seen)
        lines.append(Text(f"engine log this hour: {counts}", style="yellow"))
    return Group(*lines)


def header(doc: dict[str, Any] | None, source: ViewSource, now: datetime) -> Text:
    """Title, verdict, clock; "reconnecting" while the daemon does not answer."""
    overall = str((doc or {}).get("overall", "unknown"))
    line = Text.assemble(
        ("cmpfleet top", "bold"),
        f"  {source.url}  {now.astimezone().strftime('%H:%M:%S')}  ",
        (overall.upper(), SEVERITY_STYLE.get(overall, "")),
    )
    daemon = (doc or {}).get("daemon") or {}
    if daemon.get("pid") is not None:
        line.append(f"  fleetd pid {daemon['pid']}")
    line.append("  (q quits)", style="dim")
    if source.error is not None:
        seen = "never" if source.seen_at is None else _age(source.seen_at.isoformat(), now)
        line.append(
            f"\nreconnecting: {source.error} (last answer {seen} ago)", style="bold magenta"
        )
    return line


def rig_footer(rig: dict[str, Any]) -> Text | None:
    """How fresh the picture is; the stale reason when it is too old to judge."""
    if not rig:
        return None
    age_s = rig.get("last_poll_age_s")
    last = "n/a" if age_s is None else f"{age_s:.1f} s ago"
    text = Text(
        f"polls {rig.get('polls', 'n/a')}  last poll {last}"
        f"  kernel records lost {rig.get('kernel_records_lost', 0)}",
        style="dim",
    )
    if rig.get("stale_reason"):
        text.append(f"\nSTALE: {rig['stale_reason']}", style="bold magenta")
    if rig.get("nvml_error"):
        text.append(f"\nNVML: {rig['nvml_error']}", style="bold red")
    return text


def rig_view(
    doc: dict[str, Any] | None, source: ViewSource, now: datetime | None = None
) -> RenderableType:
    """One rig's whole picture: header, latch, cards, engine, checks, canaries, freshness."""
    now = now or datetime.now(UTC)
    parts: list[RenderableType] = [header(doc, source, now)]
    if doc is None:
        return Group(*parts)
    recovery = recovery_panel(doc.get("recovery") or {})
    if recovery is not None:
        parts.append(recovery)
    parts += [
        cards_table(doc),
        Text(""),
        engine_panel(doc.get("serving") or {}, now),
        Text(""),
        checks_view(doc.get("checks") or []),
    ]
    if doc.get("canaries"):  # an older daemon has none
        parts.append(canaries_view(doc["canaries"], doc.get("log_signatures") or [], now))
    footer = rig_footer(doc.get("rig") or {})
    if footer is not None:
        parts.append(footer)
    return Group(*parts)
