"""Small line charts as inline SVG (the report's: no script, no external asset).

One measured series (solid, with points) and, where known, the reference (dashed), on
linear axes with a few labelled ticks. Good enough to see a knee or an optimum.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

WIDTH, HEIGHT = 360, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 24, 36


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / count
    return [low + i * step for i in range(count + 1)]


def _label(value: float) -> str:
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2g}"


def line_chart(
    title: str,
    points: Sequence[tuple[float, float]],
    reference: Sequence[tuple[float, float]],
    x_unit: str,
    y_unit: str,
) -> str:
    """An SVG element: ``points`` solid, ``reference`` dashed."""
    every = [*points, *reference]
    x_low, x_high = min(p[0] for p in every), max(p[0] for p in every)
    y_high = max(p[1] for p in every) * 1.1 or 1.0
    x_span = (x_high - x_low) or 1.0

    def x(value: float) -> float:
        return LEFT + (value - x_low) / x_span * (WIDTH - LEFT - RIGHT)

    def y(value: float) -> float:
        return HEIGHT - BOTTOM - value / y_high * (HEIGHT - TOP - BOTTOM)

    def path(series: Sequence[tuple[float, float]]) -> str:
        return " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in series)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="{LEFT}" y="16" font-size="13">{html.escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#888"/>',
    ]
    for tick in _ticks(0.0, y_high):
        parts.append(
            f'<text x="{LEFT - 4}" y="{y(tick) + 4:.1f}" font-size="10" text-anchor="end">{_label(tick)}</text>'
        )
    for tick in sorted({p[0] for p in every}):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{HEIGHT - BOTTOM + 14}" font-size="10" text-anchor="middle">{_label(tick)}</text>'
        )
    parts.append(
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 6}" font-size="10" text-anchor="end">{html.escape(x_unit)}</text>'
    )
    parts.append(f'<text x="4" y="{TOP - 6}" font-size="10">{html.escape(y_unit)}</text>')
    if len(reference) >= 1:
        parts.append(
            f'<polyline points="{path(reference)}" fill="none" stroke="#999" stroke-dasharray="5,4"/>'
        )
        for a, b in reference:
            parts.append(
                f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="3" fill="#999"><title>reference {b:,.1f}</title></circle>'
            )
    if points:
        parts.append(
            f'<polyline points="{path(points)}" fill="none" stroke="#1565c0" stroke-width="2"/>'
        )
        for a, b in points:
            parts.append(
                f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="3" fill="#1565c0"><title>{b:,.2f}</title></circle>'
            )
    parts.append("</svg>")
    return "".join(parts)
