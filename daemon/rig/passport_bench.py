"""A card's bench history for its passport: the caps it ran at and the tok/W they gave.

Owners who resell or keep cards long keep a per-serial registry with a cap sweep (one
sweeps 100-200 W and writes tokens per watt per card; docs/domain.md): the cap a card
likes is part of what a card is. A bench run (``fleetctl bench``) records, from this
stop on, which UUID sat at each index (``method.card_uuids``), so a run is found by the
card's UUID even after the card moved slots. A run before that record names indices
only and is left out rather than guessed.

Pipeline parallel spreads one model over every card, so throughput and tokens per joule
are the rig's; what is the card's own is its cap and its mean draw in each cell. Tokens
per second per watt is tokens per joule: one figure, named ``tok/W`` the way owners do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daemon.store.bench import BenchRow

MAX_RUNS = 10


def _index_of(run: BenchRow, uuid: str) -> str | None:
    uuids = run.method.get("card_uuids") if isinstance(run.method, Mapping) else None
    if not isinstance(uuids, Mapping):
        return None
    return next((str(index) for index, seen in uuids.items() if seen == uuid), None)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _draw_w(cell: Mapping[str, Any], index: str) -> float | None:
    power = cell.get("power_w")
    return _number(power.get(index)) if isinstance(power, Mapping) else None


def _matrix_entry(run: BenchRow, index: str) -> dict[str, Any]:
    found = run.method.get("caps_w")
    caps: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    cells = [c for c in run.cells if isinstance(c, Mapping) and c.get("decode_tok_s_total")]
    best = max(cells, key=lambda c: float(c["decode_tok_s_total"]), default=None)
    return {
        "cap_w": _number(caps.get(index)),
        "decode_tok_s_total": None if best is None else _number(best["decode_tok_s_total"]),
        "tok_per_w": None if best is None else _number(best.get("tokens_per_joule")),
        "card_draw_w": None if best is None else _draw_w(best, index),
        "steps": [],
        "recommended_cap_w": None,
    }


def _sweep_entry(run: BenchRow, index: str) -> dict[str, Any]:
    sweep = run.sweep or {}
    steps = [s for s in sweep.get("steps") or () if isinstance(s, Mapping)]
    cells = [c for c in run.cells if isinstance(c, Mapping)]
    rows = [
        {
            "cap_w": _number(step.get("cap_w")),
            "decode_tok_s_total": _number(step.get("decode_tok_s_total")),
            "tok_per_w": _number(step.get("tokens_per_joule")),
            "card_draw_w": _draw_w(cells[n], index) if n < len(cells) else None,
        }
        for n, step in enumerate(steps)
    ]
    recommended = _number(sweep.get("recommended_cap_w"))
    chosen = next((row for row in rows if row["cap_w"] == recommended), None)
    return {
        "cap_w": recommended,
        "decode_tok_s_total": None if chosen is None else chosen["decode_tok_s_total"],
        "tok_per_w": None if chosen is None else chosen["tok_per_w"],
        "card_draw_w": None if chosen is None else chosen["card_draw_w"],
        "steps": rows,
        "recommended_cap_w": recommended,
    }


def card_bench(runs: Iterable[BenchRow], uuid: str) -> list[dict[str, Any]]:
    """The finished runs that benched card ``uuid``, newest first (``MAX_RUNS`` at most).

    Each: when, the kind (``matrix`` or ``sweep``), the build, the card's index then, its
    cap (a sweep: the recommended one), the rig's best decode throughput and tok/W at that
    cap, the card's own mean draw there, and a sweep's steps.
    """
    found: list[dict[str, Any]] = []
    for run in runs:
        if run.state == "running" or (index := _index_of(run, uuid)) is None:
            continue
        entry = _sweep_entry(run, index) if run.kind == "sweep" else _matrix_entry(run, index)
        found.append(
            {
                "run_id": run.id,
                "ts": run.started_at.isoformat(timespec="seconds"),
                "kind": run.kind,
                "state": run.state,
                "build": run.build_name,
                "index": int(index),
                **entry,
            }
        )
        if len(found) >= MAX_RUNS:
            break
    return found
