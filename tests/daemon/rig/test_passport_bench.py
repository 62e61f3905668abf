"""A card's passport lists the bench runs it was in, by UUID, with its cap and the tok/W.

Real store (SQLite); runs stored as ``daemon.bench.service`` stores them (``method.caps_w``
and ``method.card_uuids`` by index, cells with each card's draw, a sweep's steps).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from daemon.rig.passport_bench import card_bench
from daemon.rig.passport_page import bench_line, passport_html
from daemon.store import Store

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def cell(tok_s: float, tok_j: float, draws_w: dict[str, float]) -> dict[str, Any]:
    return {"decode_tok_s_total": tok_s, "tokens_per_joule": tok_j, "power_w": draws_w}


def run(store: Store, n: int, kind: str, uuids: dict[str, str] | None, **values: Any) -> None:
    method: dict[str, Any] = {"caps_w": {"0": 180.0, "1": 150.0}}
    if uuids is not None:
        method["card_uuids"] = uuids
    run_id = store.start_bench_run(
        kind=kind,
        quick=True,
        actor="test",
        build_id=None,
        build_name="b1",
        method=method,
        started_at=T0 + timedelta(minutes=n),
    )
    store.update_bench_run(run_id, **values)


def test_runs_are_found_by_uuid_across_a_slot_move(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        # An old run (no card_uuids): left out rather than guessed by index.
        run(store, 0, "matrix", None, state="done", cells=[cell(50.0, 0.2, {"0": 170.0})])
        run(
            store,
            1,
            "matrix",
            {"0": "GPU-a", "1": "GPU-b"},
            state="done",
            cells=[cell(40.0, 0.15, {"0": 160.0, "1": 140.0}), cell(90.0, 0.3, {"1": 149.0})],
        )
        steps = [
            {"cap_w": 100.0, "decode_tok_s_total": 60.0, "tokens_per_joule": 0.4},
            {"cap_w": 150.0, "decode_tok_s_total": 80.0, "tokens_per_joule": 0.35},
        ]
        run(  # GPU-b moved to index 0
            store,
            2,
            "sweep",
            {"0": "GPU-b", "1": "GPU-a"},
            state="done",
            cells=[cell(60.0, 0.4, {"0": 98.0}), cell(80.0, 0.35, {"0": 146.0})],
            sweep={"steps": steps, "recommended_cap_w": 150.0},
        )
        run(store, 3, "matrix", {"0": "GPU-b"}, cells=[])  # still running: not yet
        runs = store.list_bench_runs(100)
    finally:
        store.close()
    sweep, matrix = card_bench(runs, "GPU-b")
    assert (sweep["kind"], sweep["index"], sweep["cap_w"]) == ("sweep", 0, 150.0)
    assert (sweep["tok_per_w"], sweep["card_draw_w"]) == (0.35, 146.0)
    assert [s["card_draw_w"] for s in sweep["steps"]] == [98.0, 146.0]
    # The matrix: its cap then, the fastest cell's figures and this card's draw in it.
    assert (matrix["index"], matrix["cap_w"], matrix["decode_tok_s_total"]) == (1, 150.0, 90.0)
    assert (matrix["tok_per_w"], matrix["card_draw_w"]) == (0.3, 149.0)
    a_runs = card_bench(runs, "GPU-a")
    assert [(e["kind"], e["index"]) for e in a_runs] == [("sweep", 1), ("matrix", 0)]
    assert a_runs[0]["card_draw_w"] is None  # no draw of index 1 in the sweep's cells
    assert card_bench(runs, "GPU-zz") == []
    line = bench_line(sweep)
    assert "cap 150 W (recommended)" in line and "0.35 tok/W" in line and "drew 146 W" in line
    page = passport_html({"uuid": "GPU-b", "bench": [sweep, matrix]})
    assert "Bench (caps and tok/W)" in page and "0.35" in page
