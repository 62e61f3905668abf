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

from daemon.cli.views.causeview import causes_block, doc_causes
from daemon.cli.views.screen import SEVERITY_STYLE, Column, Line, Piece, table_lines, wrap
from hwcheck.card_ranges import cards_text

CARD_COLUMNS = (
    Column("card", 0, right=True),
    Column("state", 1),
    Column("util", 2, right=True),
    Column("memory", 3),
    Column("power/cap", 4),
    Column("temp", 5, right=True),
    Column("pcie", 6),
    Column("xid", 7, right=True),
    Column("pci", 8),
    Column("vram", 9),
    Column("brake", 10),
    Column("pcie tx/rx", 11, right=True),
    Column("sm clock", 12, right=True),
    Column("hbm", 13, right=True),
    Column("name", 14),
)
MAX_TAGS = 2  # a card's state cell: its two worst failing checks, then "+N"
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
        if not first.isdecimal() or (dash and not last.isdecimal()):
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
    """``55,706/65,536 MiB 85%``: used, total and the share; red when the card is locked."""
    total, used = card.get("memory_total_mib"), card.get("memory_used_mib")
    if total is None:
        text = "n/a"
    elif used is None:
        text = f"{total:,} MiB"
    else:
        share = card.get("memory_used_pct")
        share = round(100 * used / total) if share is None and total else share
        text = f"{used:,}/{total:,} MiB" + ("" if share is None else f" {share:.0f}%")
    if verdict == "critical":
        return Piece(f"LOCKED {text}", "bold red")
    return Piece(text, SEVERITY_STYLE.get(verdict or "", "") if verdict != "ok" else "")


def _vram(card: dict[str, Any], verdict: str | None) -> Piece:
    """``unlocked 65,536 MiB`` / ``LOCKED 8,192 MiB``: what the unlock check says."""
    total = card.get("memory_total_mib")
    size = "n/a" if total is None else f"{total:,} MiB"
    if verdict == "ok":
        return Piece(f"unlocked {size}", "green")
    if verdict == "critical":
        return Piece(f"LOCKED {size}", "bold red")
    return Piece(size, SEVERITY_STYLE.get(verdict or "", ""))


def _state(card: dict[str, Any]) -> Piece:
    """The card's failing checks as tags (``BRAKE``, ``BAR1 P2P``), else its state word."""
    state = str(card.get("state", "unknown"))
    tags = [str(tag) for tag in card.get("tags") or []]
    if not tags or state == "ok":
        return Piece(state, SEVERITY_STYLE.get(state, ""))
    more = f" +{len(tags) - MAX_TAGS}" if len(tags) > MAX_TAGS else ""
    style = SEVERITY_STYLE.get(state, "bold red" if state == "lost" else "")
    return Piece(" ".join(tags[:MAX_TAGS]) + more, style)


def _pct(value: object) -> str:
    return "n/a" if value is None else f"{value}%"


def kib_s(value: object) -> str:
    """A PCIe rate from KiB/s as ``1.4G``/``6.0M``/``12K`` per second (``n/a``)."""
    if not isinstance(value, int | float):
        return "n/a"
    for unit, size in (("G", 1024 * 1024), ("M", 1024)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}K"


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
    """One card's cells under ``CARD_COLUMNS``; a lost card shows dashes, not readings.

    The index carries ``*`` when the profile in force uses the card (``in_profile``).
    """
    xids = int(card.get("xid_since_boot") or 0)
    xid = Piece(str(xids), "bold red" if xids else "")
    mark = "*" if card.get("in_profile") else ""
    index = Piece(f"{card.get('index', '?')}{mark}")
    pci = Piece(str(card.get("pci_bus_id") or "-"))
    name = Piece(str(card.get("name") or "-"))
    if card.get("state") == "lost":
        dash = Piece("-")
        lost = Piece("LOST", "bold red")
        return [
            index,
            lost,
            dash,
            dash,
            dash,
            dash,
            dash,
            xid,
            pci,
            dash,
            dash,
            dash,
            dash,
            dash,
            name,
        ]
    known = card.get("clock_event_reasons") is not None or card.get("power_brake_active")
    brake = card.get("power_brake_active")
    clock = card.get("sm_clock_mhz")
    hbm = card.get("memory_temperature_c")
    traffic = f"{kib_s(card.get('pcie_tx_kib_s'))}/{kib_s(card.get('pcie_rx_kib_s'))}"
    return [
        index,
        _state(card),
        Piece(_pct(card.get("utilization_gpu_pct"))),
        _memory(card, verdict),
        Piece(f"{fmt(card.get('power_draw_w'))}/{fmt(card.get('power_limit_w'), ' W')}"),
        Piece(fmt(card.get("temperature_c"), " C")),
        _pcie(card),
        xid,
        pci,
        _vram(card, verdict),
        Piece("ACTIVE", "bold red") if brake else Piece("off" if known else "n/a"),
        Piece(traffic),
        Piece("n/a" if clock is None else f"{clock:,} MHz"),
        Piece(fmt(hbm, " C")),
        name,
    ]


def process_lines(card: dict[str, Any], width: int | None) -> list[Line]:
    """One line per compute process on the card: pid, name, container, memory."""
    lines = []
    for process in card.get("processes") or []:
        used = process.get("used_memory_mib")
        words = [
            f"pid {process.get('pid')}",
            str(process.get("name") or "?"),
            str(process.get("container") or "host"),
            "n/a" if used is None else f"{used:,} MiB",
        ]
        lines += wrap([Piece("  ".join(words), "dim")], width, INDENT + 2, 1, lead=INDENT)
    return lines


def cards_lines(
    doc: dict[str, Any],
    width: int | None,
    only: Collection[int] | None = None,
    processes: bool = False,
) -> list[Line]:
    """The card table (header and one line per card); a line when there are no readings.

    ``processes``: each card's compute processes on the lines under it.
    """
    cards = [c for c in doc.get("cards") or [] if only is None or int(c.get("index", -1)) in only]
    if not cards:
        why = "no readings" if not doc.get("cards") else "none of the cards asked for"
        return [Line(Piece(f"cards: {why}", SEVERITY_STYLE["unknown"]))]
    verdicts = unlock_verdicts(doc.get("checks") or [])
    rows = [card_cells(card, verdicts.get(int(card.get("index", -1)))) for card in cards]
    header, *card_rows = table_lines(CARD_COLUMNS, rows, width)
    lines = [header]
    for card, row in zip(cards, card_rows, strict=True):
        lines.append(row)
        if processes:
            lines += process_lines(card, width)
    return lines


def _brief(screen: Screen) -> int | None:
    """Lines a secondary text may take: 2 on a screen of limited height, else all."""
    return None if screen.height is None else 2


def latch_lines(recovery: dict[str, Any], screen: Screen) -> list[Line]:
    """The reboot prompt (reason and advice) while the latch is set; nothing otherwise.

    A crash bundle that could not be written (a full disk) is said under it, latch or not.
    """
    at_most = _brief(screen)
    degraded = (recovery.get("evidence") or {}).get("degraded")
    evidence = (
        wrap(
            [Piece("EVIDENCE LOST", "bold yellow"), Piece(f": {degraded}")],
            screen.width,
            INDENT,
            at_most,
        )
        if degraded
        else []
    )
    if not recovery.get("reboot_required"):
        return evidence
    since = f" since {clock_text(recovery['since'])}" if recovery.get("since") else ""
    head = [
        Piece("REBOOT REQUIRED", "bold red"),
        Piece(f"{since}: {recovery.get('reason') or 'n/a'}"),
    ]
    advice = [Piece("advice:", "bold"), Piece(str(recovery.get("advice") or "n/a"), "bold")]
    return [
        *wrap(head, screen.width, INDENT, at_most),
        *wrap(advice, screen.width, INDENT, at_most),
        *evidence,
    ]


def drain_lines(drain: dict[str, Any] | None, screen: Screen) -> list[Line]:
    """``DRAINING`` with who, why and what still runs, while the rig drains; else nothing."""
    if not drain or not drain.get("draining"):
        return []
    running = drain.get("in_flight")
    state = (
        "quiet" if drain.get("quiet") else "no guard" if running is None else f"{running} running"
    )
    why = f" ({drain['reason']})" if drain.get("reason") else ""
    text = (
        f" since {clock_text(drain.get('since'))} by {drain.get('by')}{why}: {state}, "
        f"grace {drain.get('grace_left_s')} s left; fleetctl undrain ends it"
    )
    return wrap([Piece("DRAINING", "bold yellow"), Piece(text)], screen.width, INDENT)


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


def pinned_text(image: str) -> str:
    """An image reference short enough for a status line: ``name@sha256:0123456789ab``."""
    name, at, digest = image.partition("@")
    if not at:
        return image
    algorithm, _, value = digest.partition(":")
    return f"{name.rsplit('/', 1)[-1]}@{algorithm}:{value[:12]}"


def engine_lines(
    serving: dict[str, Any],
    screen: Screen,
    now: datetime,
    latch_reason: str | None = None,
    label: str = "engine:",
) -> list[Line]:
    """``engine: ready (pid N), restarts 0, up 8m06s, URL``; load, why and last crash after.

    The reason it is stopped is left out when it is the latch's, shown just above.
    ``label``: ``engine NAME:`` where the rig runs several (``all_engine_lines``).
    """
    state = str(serving.get("state", "unknown"))
    words = [Piece(label, "bold"), Piece(state, ENGINE_STYLE.get(state, "bold red"))]
    several = label != "engine:"  # the label names the profile; the line fits 80 columns
    facts = [f"restarts {serving.get('restarts', 0)}"]
    if several and serving.get("cards"):
        facts.insert(0, f"{cards_text(serving['cards'])}")
    if serving.get("pid") is not None:
        words.append(Piece(f"(pid {serving['pid']})"))
    if state == "ready" and serving.get("since"):
        facts.append(f"up {age_text(serving.get('since'), now)}")
    elif serving.get("since"):
        facts.append(f"since {age_text(serving.get('since'), now)} ago")
    if serving.get("url") and several:
        facts.append(f"port {str(serving['url']).rsplit(':', 1)[-1].rstrip('/')}")
    elif serving.get("url"):
        facts.append(str(serving["url"]))
    if serving.get("profile") and not several:
        cards = serving.get("cards")
        on = f" on {cards_text(cards)} (*)" if cards else ""
        facts.append(f"profile {serving['profile']}{on}")
    if serving.get("pinned_image"):  # a rollback's digest (fleetctl rollback): not the recipe's
        facts.append(f"pinned to {pinned_text(str(serving['pinned_image']))} (rollback)")
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
    refused = bool(refusal_lines(serving, screen))  # it says why the engine is down now
    if (
        reason
        and state != "ready"
        and not refused
        and not (latch_reason and reason in latch_reason)
    ):
        why = Piece(f"why: {reason}")
        lines += wrap([why], screen.width, INDENT, max_lines=_brief(screen), lead=INDENT)
    lines += refusal_lines(serving, screen)
    lines += guard_lines(serving, screen)
    if serving.get("crash_class"):
        crash = Piece(f"last crash: {serving['crash_class']}", "yellow")
        lines += wrap([crash], screen.width, INDENT, lead=INDENT)
    return lines


def all_engine_lines(
    doc: dict[str, Any], screen: Screen, now: datetime, latch_reason: str | None = None
) -> list[Line]:
    """The engine block: one engine as always; several, each under ``engine NAME:``.

    Each engine's lines wrap at the screen's width (80 columns in a pipe), its cards named.
    """
    engines = [e for e in doc.get("engines") or [] if isinstance(e, dict)]
    if len(engines) < 2:
        serving = doc.get("serving")
        return engine_lines(serving, screen, now, latch_reason) if isinstance(serving, dict) else []
    lines: list[Line] = []
    for engine in engines:
        label = f"engine {engine.get('profile') or '?'}:"
        lines += engine_lines(engine, screen, now, latch_reason, label)
    return lines


def guard_lines(serving: dict[str, Any], screen: Screen) -> list[Line]:
    """``guard: up on 0.0.0.0:8080, 3 sessions, 1 refused over the cap``: the traffic guard."""
    guard = serving.get("guard")
    if not isinstance(guard, dict):
        return []
    up = bool(guard.get("up"))
    facts = [f"{'up' if up else 'DOWN'} on {guard.get('listen') or '?'}"]
    facts.append(f"{int(guard.get('sessions') or 0)} sessions")
    for key, words in (
        ("refused", "refused over the cap"),
        ("leaks_last_hour", "leaks in the last hour"),
        ("loops_last_hour", "loops in the last hour"),
    ):
        if guard.get(key):
            facts.append(f"{guard[key]} {words}")
    pieces = [Piece("guard:", "bold"), Piece(", ".join(facts), "" if up else "bold red")]
    return wrap(pieces, screen.width, INDENT, lead=INDENT)


# How a verdict an alert set begins (``hwcheck.verdict.ALERT_WHY``, the same text: the
# status fast path imports nothing of hwcheck; a test holds the two equal).
ALERT_WHY = "alert "


# Refusal codes whose reasons the status shows already (the causes, the latch prompt).
SHOWN_ABOVE = frozenset({"critical_check", "warning_check", "reboot_latch"})


def refusal_lines(serving: dict[str, Any], screen: Screen) -> list[Line]:
    """``refused (reboot_latch): ...``: the last start refused, kept until the next start."""
    refusal = serving.get("refusal")
    if not isinstance(refusal, dict) or serving.get("state") in ("ready", "starting"):
        return []
    found = [str(code) for code in refusal.get("codes") or []]
    codes = ", ".join(found) or "refused"
    said = refusal.get("headline") or refusal.get("message") or ""  # older fleetd: message
    if found and set(found) <= SHOWN_ABOVE:
        said = "by the causes shown here"
    text = f"last start refused ({codes}): {said}"
    return wrap(
        [Piece(text, "yellow")], screen.width, INDENT, max_lines=_brief(screen), lead=INDENT
    )


def rig_body(
    doc: dict[str, Any],
    screen: Screen,
    now: datetime,
    only: Collection[int] | None = None,
    used: int = 0,
    processes: bool = False,
) -> list[Line]:
    """Latch, critical causes, cards, engine, then the warnings, fitted below ``used`` lines.

    The critical causes (each with its advice, roots first) come right after the latch, so
    an 80x24 screen shows the verdict, the root cause and what to do before the card table;
    the latch and every card always stay, the causes shrink to fit what is left.
    """
    rig = doc.get("rig") or {}
    recovery = doc.get("recovery") or {}
    top = latch_lines(recovery, screen) + drain_lines(doc.get("drain"), screen)
    why = str(rig.get("why") or "")
    if why.startswith(ALERT_WHY):  # the verdict is an alert's (no check says it): name it
        style = SEVERITY_STYLE.get(str(doc.get("overall")), "bold")
        top += wrap([Piece("alert:", style), Piece(why.removeprefix(ALERT_WHY))], screen.width)
    if rig.get("stale_reason"):
        top += wrap([Piece("STALE:", "bold magenta"), Piece(rig["stale_reason"])], screen.width)
    if rig.get("nvml_error"):
        top += wrap([Piece("NVML:", "bold red"), Piece(rig["nvml_error"])], screen.width)
    cards = cards_lines(doc, screen.width, only, processes)
    latched = recovery.get("reason") if recovery.get("reboot_required") else None
    engine = all_engine_lines(doc, screen, now, latched)
    causes = doc_causes(doc, only)
    critical = [c for c in causes if c.get("severity") == "critical"]
    others = [c for c in causes if c.get("severity") != "critical"]
    fixed = used + len(top) + len(cards) + len(engine)
    room = None if screen.height is None else max(1, screen.height - fixed)
    first = causes_block(critical, screen.width, room)
    room_left = None if room is None else max(1 if not first else 0, room - len(first))
    rest = causes_block(others, screen.width, room_left) if room_left != 0 else []
    if not causes:
        total = len(doc.get("checks") or [])
        rest = [Line(Piece(f"checks: all {total} ok", "green"))]
    elif others and not rest:
        rest = [Line(Piece(f"+{len(others)} warnings (fleetctl status)", "yellow"))][
            : room_left or 0
        ]
    return [*top, *first, *cards, *engine, *rest]
