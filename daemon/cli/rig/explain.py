"""``fleetctl explain KIND KEY``: the long explanation behind a fault's headline.

Headlines and steps travel everywhere (status, events, log lines, alerts); the text that
says why is shown once, here (and in ``status --verbose`` for this boot's faults). It is
read from the same tables fleetd uses (the Xid catalogue with this config's ``[xid.N]``
overrides, the one advice table), so it needs no daemon and no token.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from daemon.cli.output import EXIT_BAD_INPUT, Output
from daemon.config import ConfigError, load_cli_settings, xid_catalogue
from hwcheck.advice import ACTION_STEPS, RigNow
from hwcheck.check_texts import CHECK_TEXTS
from hwcheck.explain import Explanation, of_advice, of_check, of_xid, xid_text
from hwcheck.model import Advice, XidInfo
from hwcheck.recovery_actions import RECOVERY_ACTION_XID, RECOVERY_ACTIONS

KINDS = ("xid", "advice")
WRAP_CHARS = 88  # into a pipe; on a terminal, its width
MIN_WRAP_CHARS = 20


def _xid_infos(key: str, config: Path | None, out: Output) -> list[XidInfo]:
    """The catalogue's entry for Xid ``key``; for 154 one per recovery action code."""
    if not key.isdecimal() or len(key) > 10:
        out.fail(f"explain xid: {key!r} is not an Xid number (e.g. 31)", EXIT_BAD_INPUT)
    try:
        catalogue = xid_catalogue(load_cli_settings(config))
    except ConfigError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    xid = int(key)
    if xid != RECOVERY_ACTION_XID:
        return [catalogue.info(xid)]
    return [catalogue.info(xid, f"to 0x{code:x}") for code in RECOVERY_ACTIONS]


def _advice(key: str, out: Output) -> Advice:
    if key not in set(Advice):
        known = ", ".join(Advice)
        out.fail(f"explain advice: {key!r} is not one of {known}", EXIT_BAD_INPUT)
    return Advice(key)


def wrap_width(out: Output) -> int:
    """The terminal's width on a terminal (never 88 on a 60- or 200-column one), else 88."""
    if out.is_terminal:
        return max(MIN_WRAP_CHARS, out.console.width)
    return WRAP_CHARS


def _paragraph(text: str, width: int = WRAP_CHARS) -> str:
    return textwrap.fill(text, width, break_on_hyphens=False)


def _show_xid(out: Output, info: XidInfo) -> None:
    width = wrap_width(out)
    out.line(f"Xid {info.xid}: {info.title} ({info.xid_class.value})")
    for text in xid_text(info):
        out.line(_paragraph(text, width))
    out.line(_paragraph(f"what to do: {ACTION_STEPS[info.action].text(RigNow())}", width))
    if info.advice is not None:
        out.line(f"why that step: fleetctl explain advice {info.advice.value}")


def _show_check(out: Output, check_id: str) -> int:
    """``explain power_brake``: what the check means on these rigs, and what to do."""
    item = of_check(check_id)
    text = CHECK_TEXTS.get(check_id)
    if item is None or text is None:
        known = ", ".join(sorted(CHECK_TEXTS))
        out.fail(
            f"explain: {check_id!r} is not xid N, advice KIND or a check (known checks: {known})",
            EXIT_BAD_INPUT,
        )
    if out.json_mode:
        out.emit_json([item.as_dict()])
        return 0
    width = wrap_width(out)
    out.line(f"{check_id}: {text.title}")
    out.line(_paragraph(text.meaning, width))
    out.line(_paragraph(f"what to do: {text.remedy}", width))
    return 0


def run(out: Output, kind: str, key: str | None, config: Path | None) -> int:
    """0 with the text; 2 with one line for an unknown kind or key.

    ``kind`` is ``xid`` or ``advice`` (with ``key``), or a check id on its own.
    """
    if kind not in KINDS:
        if key is not None:
            out.fail(f"explain: {kind!r} is not one of {', '.join(KINDS)}", EXIT_BAD_INPUT)
        return _show_check(out, kind)
    if key is None:
        what = (
            "an Xid number (e.g. 31)"
            if kind == "xid"
            else "warm_reboot, cold_power_cycle or take_card_out"
        )
        out.fail(f"explain {kind} needs {what}", EXIT_BAD_INPUT)
    found: list[Explanation]
    if kind == "xid":
        infos = _xid_infos(key, config, out)
        found = [of_xid(info) for info in infos]
    else:
        infos = []
        found = [of_advice(_advice(key, out))]
    if out.json_mode:
        out.emit_json([item.as_dict() for item in found])
        return 0
    if infos:
        for number, info in enumerate(infos):
            if number:
                out.line("")
            _show_xid(out, info)
    else:
        item = found[0]
        out.line(f"{item.fault}: {item.title}")
        out.line(_paragraph(item.text, wrap_width(out)))
    return 0
