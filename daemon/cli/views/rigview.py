"""One rig's picture as lines that fit the screen: ``status``, ``check``, ``top``, ``fleet top``.

What a person at 3 a.m. needs first comes first: the verdict (the caller's header), the
reboot latch with its reason and advice, one line per card, the engine, then the checks
that fail with their remedies. On a terminal the card table keeps as many columns as fit
(``CARD_COLUMNS``, in rank order: at 80 columns index, state, memory, power, temperature,
PCIe and Xids; wider screens add the PCI address, brake, SM clock, HBM temperature and
name), and with a height the optional parts shrink first (a check's remedy, then its
message to one line, then a "+N more" line), so every card, the verdict and the latch
always stay on screen. Into a pipe everything is shown, one line per item, unwrapped.

Pure: a status document (``GET /api/v1/status``, or ``check``'s) in, ``Line``s out. It
reads keys defensively, so an older or newer daemon still draws.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from daemon.cli.views.screen import SEVERITY_STYLE, Column, Line, Piece, table_lines, wrap

CARD_COLUMNS = (
    Column("card", 0, right=True),
    Column("state", 1),
    Column("memory", 2),
    Column("power/cap", 3),
    Column("temp", 4, right=True),
    Column("pcie", 5),
    Column("xid", 6, right=True),
    Column("pci", 7),
    Column("brake", 8),
    Column("sm clock", 9, right=True),
    Column("hbm", 10, right=True),
    Column("name", 11),
)
INDENT = 4  # continuation lines of a check, the latch, the engine


@dataclass(frozen=True)
class Screen:
    """The room a view has: ``None`` is unlimited (a pipe: everything, unwrapped)."""

    width: int | None = None
    height: int | None = None


def parse_cards(text: str) -> frozenset[int]:
    """``--only 0,2`` or ``--only 1-3``: the card indexes (``ValueError`` when malformed)."""
    picked: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{text!r} is not a list of card indexes such as 0,2 or 1-3")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise ValueError(f"{part.strip()!r}: the range runs backwards")
        picked.update(range(low, high + 1))
    return frozenset(picked)


def fmt(value: object, unit: str = "") -> str:
    """A reading with its unit, ``n/a`` when the card does not report it."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.0f}{unit}"
    return f"{value}{unit}"


def unlock_verdicts(checks: Sequence[dict[str, Any]]) -> dict[int, str]:
    """Card index -> severity of its ``vram_unlocked`` check."""
    return {
        int(c["card"]): str(c["severity"])
        for c in checks
        if c.get("id") == "vram_unlocked" and c.get("card") is not None
    }


def _memory(card: dict[str, Any], verdict: str | None) -> Piece:
    total = card.get("memory_total_mib")
    size = "n/a" if total is None else f"{total:,} MiB"
    if verdict == "ok":
        return Piece(f"unlocked {size}", "green")
    if verdict == "critical":
        return Piece(f"LOCKED {size}", "bold red")
    return Piece(size, SEVERITY_STYLE.get(verdict or "", ""))


def _pcie(card: dict[str, Any]) -> Piece:
    gen, width = card.get("pcie_gen"), card.get("pcie_width")
    if gen is None:
        return Piece("n/a")
    link = f"Gen{gen} x{fmt(width)}"
    base_gen = card.get("pcie_baseline_gen") or card.get("pcie_gen_max")
    base_width = card.get("pcie_baseline_width") or card.get("pcie_width_max")
    if base_gen is None or base_width is None:
        return Piece(link)
    if gen < base_gen or (width is not None and width < base_width):
        return Piece(f"{link}<Gen{base_gen}x{base_width}", "yellow")
    return Piece(link)


def card_cells(card: dict[str, Any], verdict: str | None) -> list[Piece]:
    """One card's cells under ``CARD_COLUMNS``; a lost card shows dashes, not readings."""
    xids = int(card.get("xid_since_boot") or 0)
    xid = Piece(str(xids), "bold red" if xids else "")
    index, pci = Piece(str(card.get("index", "?"))), Piece(str(card.get("pci_bus_id") or "-"))
    name = Piece(str(card.get("name") or "-"))
    if card.get("state") == "lost":
        dash = Piece("-")
        lost = Piece("LOST", "bold red")
        return [index, lost, dash, dash, dash, dash, xid, pci, dash, dash, dash, name]
    known = card.get("clock_event_reasons") is not None or card.get("power_brake_active")
    brake = card.get("power_brake_active")
    clock = card.get("sm_clock_mhz")
    hbm = card.get("memory_temperature_c")
    state = str(card.get("state", "unknown"))
    return [
        index,
        Piece(state, SEVERITY_STYLE.get(state, "")),
        _memory(card, verdict),
        Piece(f"{fmt(card.get('power_draw_w'))}/{fmt(card.get('power_limit_w'), ' W')}"),
        Piece(fmt(card.get("temperature_c"), " C")),
        _pcie(card),
        xid,
        pci,
        Piece("ACTIVE", "bold red") if brake else Piece("off" if known else "n/a"),
        Piece("n/a" if clock is None else f"{clock:,} MHz"),
        Piece(fmt(hbm, " C")),
        name,
    ]


def cards_lines(
    doc: dict[str, Any], width: int | None, only: Collection[int] | None = None
) -> list[Line]:
    """The card table (header and one line per card); a line when there are no readings."""
    cards = [c for c in doc.get("cards") or [] if only is None or int(c.get("index", -1)) in only]
    if not cards:
        why = "no readings" if not doc.get("cards") else "none of the cards asked for"
        return [Line(Piece(f"cards: {why}", SEVERITY_STYLE["unknown"]))]
    verdicts = unlock_verdicts(doc.get("checks") or [])
    rows = [card_cells(card, verdicts.get(int(card.get("index", -1)))) for card in cards]
    return table_lines(CARD_COLUMNS, rows, width)


def _brief(screen: Screen) -> int | None:
    """Lines a secondary text may take: 2 on a screen of limited height, else all."""
    return None if screen.height is None else 2


def latch_lines(recovery: dict[str, Any], screen: Screen) -> list[Line]:
    """The reboot prompt (reason and advice) while the latch is set; nothing otherwise."""
    if not recovery.get("reboot_required"):
        return []
    at_most = _brief(screen)
    since = f" since {clock_text(recovery['since'])}" if recovery.get("since") else ""
    head = [
        Piece("REBOOT REQUIRED", "bold red"),
        Piece(f"{since}: {recovery.get('reason') or 'n/a'}"),
    ]
    advice = [Piece("advice:", "bold"), Piece(str(recovery.get("advice") or "n/a"), "bold")]
    return [
        *wrap(head, screen.width, INDENT, at_most),
        *wrap(advice, screen.width, INDENT, at_most),
    ]


def age_text(since: str | None, now: datetime) -> str:
    """``1h02m`` since an ISO time (``n/a`` when unknown)."""
    if not since:
        return "n/a"
    try:
        seconds = int((now - datetime.fromisoformat(since)).total_seconds())
    except (TypeError, ValueError):
        return "n/a"
    hours, rest = divmod(max(seconds, 0), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def clock_text(iso: str | None) -> str:
    """An ISO time as this machine's local ``YYYY-MM-DD HH:MM:SS`` (the input if unreadable)."""
    if not iso:
        return "n/a"
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return iso


ENGINE_STYLE = {"ready": "green", "starting": "cyan", "stopped": "", "stopping": "cyan"}


def engine_lines(
    serving: dict[str, Any], screen: Screen, now: datetime, latch_reason: str | None = None
) -> list[Line]:
    """``engine: ready (pid N), restarts 0, up 8m06s, URL``; load, why and last crash after.

    The reason it is stopped is left out when it is the latch's, shown just above.
    """
    state = str(serving.get("state", "unknown"))
    words = [Piece("engine:", "bold"), Piece(state, ENGINE_STYLE.get(state, "bold red"))]
    facts = [f"restarts {serving.get('restarts', 0)}"]
    if serving.get("pid") is not None:
        words.append(Piece(f"(pid {serving['pid']})"))
    if state == "ready" and serving.get("since"):
        facts.append(f"up {age_text(serving.get('since'), now)}")
    elif serving.get("since"):
        facts.append(f"since {age_text(serving.get('since'), now)} ago")
    if serving.get("url"):
        facts.append(str(serving["url"]))
    if serving.get("profile"):
        facts.append(f"profile {serving['profile']}")
    remaining = serving.get("backoff_remaining_s")
    if remaining is not None:
        facts.append(f"next try in {remaining:.0f} s")
    words[-1] = Piece(words[-1].text + ",", words[-1].style)
    words.append(Piece(", ".join(facts)))
    lines = wrap(words, screen.width, INDENT)
    drift = serving.get("drift")
    if drift:  # an engine of another recipe runs un-adopted: `fleetctl start` says what to do
        text = f"DRIFT: pid {drift.get('pid')} at {drift.get('url')} runs another recipe"
        lines += wrap(
            [Piece(text + " (left running; see fleetctl start)", "bold yellow")],
            screen.width,
            INDENT,
            lead=INDENT,
        )
    metrics = serving.get("metrics") or {}
    if metrics:
        rate = metrics.get("generation_tokens_per_s")
        load = (
            f"tokens/s {'n/a' if rate is None else f'{rate:.1f}'}, "
            f"running {fmt(metrics.get('requests_running'))}, "
            f"waiting {fmt(metrics.get('requests_waiting'))}, "
            f"kv cache {fmt(metrics.get('kv_cache_usage_pct'), '%')}"
        )
        lines += wrap([Piece(load)], screen.width, INDENT, lead=INDENT)
    reason = serving.get("reason")
    if reason and state != "ready" and not (latch_reason and reason in latch_reason):
        why = Piece(f"why: {reason}")
        lines += wrap([why], screen.width, INDENT, max_lines=_brief(screen), lead=INDENT)
    if serving.get("crash_class"):
        crash = Piece(f"last crash: {serving['crash_class']}", "yellow")
        lines += wrap([crash], screen.width, INDENT, lead=INDENT)
    return lines


SEVERITY_ORDER = {"critical": 0, "warning": 1, "unknown": 2}


def failing_checks(
    checks: Sequence[dict[str, Any]], only: Collection[int] | None = None
) -> list[dict[str, Any]]:
    """The checks that are not ok, critical first (with ``only``: rig-wide ones too)."""
    failing = [
        c
        for c in checks
        if c.get("severity") != "ok"
        and (only is None or c.get("card") is None or int(c["card"]) in only)
    ]
    return sorted(failing, key=lambda c: SEVERITY_ORDER.get(str(c.get("severity")), 3))


def check_lines(check: dict[str, Any], width: int | None, brief: bool = False) -> list[Line]:
    """``critical xid_since_boot card 1: message`` and its ``fix:`` line (``brief``: 1 line)."""
    severity = str(check.get("severity", "unknown"))
    card = check.get("card")
    where = "" if card is None else f" card {card}"
    head = [
        Piece(severity, SEVERITY_STYLE.get(severity, "")),
        Piece(f"{check.get('id', '?')}{where}: {check.get('message', '')}"),
    ]
    if brief:
        return wrap(head, width, INDENT, max_lines=1)
    lines = wrap(head, width, INDENT)
    if check.get("remedy"):
        lines += wrap([Piece(f"fix: {check['remedy']}")], width, INDENT, lead=INDENT)
    return lines


def checks_block(
    checks: Sequence[dict[str, Any]], width: int | None, room: int | None, total: int
) -> list[Line]:
    """The failing checks in at most ``room`` lines: whole, then one line each, then "+N"."""
    if not checks:
        return [Line(Piece(f"checks: all {total} ok", "green"))]
    whole = [check_lines(check, width) for check in checks]
    if room is None or sum(len(lines) for lines in whole) <= room:
        return [line for lines in whole for line in lines]
    if len(checks) > room:  # not even a line each: as many as fit, then how many more
        shown = max(0, room - 1)
        more = Line(
            Piece(f"+{len(checks) - shown} more failing checks (fleetctl status)", "yellow")
        )
        return [*(check_lines(c, width, brief=True)[0] for c in checks[:shown]), more]
    spare = room - len(checks)  # a line each fits; the worst get their whole text first
    picked: list[Line] = []
    for check, full in zip(checks, whole, strict=True):
        if len(full) - 1 <= spare:
            picked += full
            spare -= len(full) - 1
        else:
            picked += check_lines(check, width, brief=True)
    return picked


def rig_body(
    doc: dict[str, Any],
    screen: Screen,
    now: datetime,
    only: Collection[int] | None = None,
    used: int = 0,
) -> list[Line]:
    """Latch, staleness, cards, engine and failing checks, fitted below ``used`` lines."""
    rig = doc.get("rig") or {}
    recovery = doc.get("recovery") or {}
    lines = latch_lines(recovery, screen)
    if rig.get("stale_reason"):
        lines += wrap([Piece("STALE:", "bold magenta"), Piece(rig["stale_reason"])], screen.width)
    if rig.get("nvml_error"):
        lines += wrap([Piece("NVML:", "bold red"), Piece(rig["nvml_error"])], screen.width)
    lines += cards_lines(doc, screen.width, only)
    latched = recovery.get("reason") if recovery.get("reboot_required") else None
    if isinstance(doc.get("serving"), dict):
        lines += engine_lines(doc["serving"], screen, now, latched)
    room = None if screen.height is None else max(1, screen.height - used - len(lines))
    checks = doc.get("checks") or []
    lines += checks_block(failing_checks(checks, only), screen.width, room, len(checks))
    return lines
