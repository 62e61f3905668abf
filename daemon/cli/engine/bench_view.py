"""A bench run as text: the method in a few lines, then the cells in 80 columns.

Plain aligned text, never wider than 80 columns whatever the terminal (owners paste it on
forums, where wider tables wrap): figures are rounded to what a bench can tell apart.
"""

from __future__ import annotations

from typing import Any

WIDTH = 80
_HEADER = (
    f"{'cell':<12}{'tok/s':>7}{'total':>8}{'prefill':>8}{'TTFT s':>8}"
    f"{'ITL p50/95':>12}{'acc':>5}{'W/card':>8}{'tok/J':>7}"
)


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    number = float(value)
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{digits}f}"


def cell_line(cell: dict[str, Any]) -> str:
    """One cell's row (at most 80 columns)."""
    power = cell.get("power_w") or {}
    mean_w = sum(power.values()) / len(power) if power else None
    itl = f"{_num(cell.get('itl_p50_ms'), 0)}/{_num(cell.get('itl_p95_ms'), 0)}"
    acceptance = cell.get("spec_acceptance")
    line = (
        f"{str(cell.get('key', ''))[:12]:<12}"
        f"{_num(cell.get('decode_tok_s_per_stream')):>7}"
        f"{_num(cell.get('decode_tok_s_total')):>8}"
        f"{_num(cell.get('prefill_tok_s'), 0):>8}"
        f"{_num(cell.get('ttft_s'), 2):>8}"
        f"{itl:>12}"
        f"{'-' if acceptance is None else f'{acceptance:.2f}':>5}"
        f"{_num(mean_w, 0):>8}"
        f"{_num(cell.get('tokens_per_joule'), 2):>7}"
    )
    return line[:WIDTH]


def _wrap(prefix: str, text: str) -> list[str]:
    """``text`` wrapped at word boundaries to 80 columns, later lines indented."""
    lines: list[str] = []
    current = prefix
    for word in text.split():
        candidate = f"{current} {word}" if current.strip() else f"{current}{word}"
        if len(candidate) > WIDTH and current.strip():
            lines.append(current)
            current = "  " + word
        else:
            current = candidate
    if current.strip():
        lines.append(current)
    return lines


def run_lines(run: dict[str, Any]) -> list[str]:
    """The whole run: head, method, cells, sweep, verdict."""
    method = run.get("method") or {}
    axes = method.get("axes") or {}
    build = (method.get("build") or {}).get("name") or run.get("build_name") or "unknown"
    lines = [f"bench run {run.get('id')} ({run.get('kind')}, {run.get('state')})"]
    lines += _wrap("build:", str(build))
    lines += _wrap(
        "method:",
        f"concurrency {axes.get('concurrency')}, depth {axes.get('depth_tokens')} tokens, "
        f"temperature {axes.get('temperature')}, {axes.get('output_tokens')} output tokens "
        "with ignore_eos, unique prefixes; speculative "
        f"{_speculative(method.get('speculative'))}; caps {_caps(method.get('caps_w'))}",
    )
    for note in [*(method.get("notes") or []), *(method.get("warnings") or [])]:
        lines += _wrap("note:", str(note))
    lines += ["", _HEADER, "-" * len(_HEADER)]
    cells = run.get("cells") or []
    lines += [cell_line(cell) for cell in cells] or ["(no cell finished)"]
    sweep = run.get("sweep") or {}
    if sweep.get("steps"):
        lines += ["", f"{'cap W':>7}{'total tok/s':>14}{'tok/J':>9}{'W/card':>9}"]
        for step in sweep["steps"]:
            lines.append(
                f"{_num(step.get('cap_w'), 0):>7}{_num(step.get('decode_tok_s_total')):>14}"
                f"{_num(step.get('tokens_per_joule'), 2):>9}{_num(step.get('power_w'), 0):>9}"
            )
    verdict = run.get("verdict") or {}
    if verdict.get("text"):
        lines += ["", *_wrap("verdict:", str(verdict["text"]))]
    if run.get("error"):
        lines += _wrap("error:", str(run["error"]))
    return [line[:WIDTH] for line in lines]


def _speculative(spec: Any) -> str:
    if not isinstance(spec, dict) or spec.get("method") in (None, "none"):
        return "off"
    return f"{spec.get('method')} x{spec.get('num_speculative_tokens')}"


def _caps(caps: Any) -> str:
    if not isinstance(caps, dict) or not caps:
        return "unknown"
    values = sorted({v for v in caps.values() if v is not None})
    if len(values) == 1:
        return f"{values[0]:g} W on every card"
    return ", ".join(f"card {k} {v:g} W" for k, v in caps.items() if v is not None)


def list_lines(document: dict[str, Any]) -> list[str]:
    """``bench list``: runs per build."""
    lines: list[str] = []
    for group in document.get("builds") or []:
        lines.append(f"build {group.get('build')}:")
        for run in group.get("runs") or []:
            head = (
                f"  run {run.get('id')} {run.get('kind')} {run.get('state')} "
                f"{str(run.get('started_at'))[:19]} cells {run.get('cells')}"
            )
            lines.append(head[:WIDTH])
            if run.get("verdict"):
                lines += _wrap("    ", str(run["verdict"]))
    return lines or ["no bench run yet: run fleetctl bench"]
