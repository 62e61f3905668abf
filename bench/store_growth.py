"""Store growth benchmark: N days of 8-card 1 Hz polls through the store's normal path.

Time is compressed: timestamps are generated, each poll becomes a ``RigSnapshot`` exactly
as the poller makes one, polls are written with ``Store.record_samples_batch`` (one
transaction per ``--batch-polls`` polls), and ``rollup_and_prune`` runs every simulated
``--rollup-every-s`` seconds with the default retention (48 h raw, 90 days rollups).
At the end: the SQLite file size (WAL checkpointed and included) and the time of the
dashboard's 24 h chart query for one card (median of several runs).

    .venv/bin/python bench/store_growth.py [--days 30] [--db PATH]

Targets: DB < 300 MB, 24 h chart < 100 ms.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from daemon.store import DEFAULT_RAW_RETENTION_S, DEFAULT_ROLLUP_RETENTION_S, Store
from hwcheck.model import GpuSnapshot, RigSnapshot

START = datetime(2025, 1, 1, tzinfo=UTC)
SIZE_TARGET_MB = 300.0
CHART_TARGET_MS = 100.0


def make_poll(t_s: int, cards: int) -> RigSnapshot:
    """One poll of a busy rig: values vary smoothly per card so rollups are non-trivial."""
    snaps = []
    for index in range(cards):
        phase = t_s / 300.0 + index
        snaps.append(
            GpuSnapshot(
                index=index,
                pci_bus_id=f"0000:{index + 1:02x}:00.0",
                uuid=f"GPU-bench-{index:02d}-0000-0000-000000000000",
                name="NVIDIA CMP 170HX",
                serial=f"13240000{index:05d}",
                memory_total_mib=65536,
                memory_used_mib=60000 + (t_s + index) % 97,
                power_draw_w=round(150.0 + 25.0 * math.sin(phase), 2),
                power_limit_w=180.0,
                clock_event_reasons=0x4 if t_s % 7 == 0 else 0,
                sm_clock_mhz=1410 - (t_s + 3 * index) % 30,
                temperature_c=float(60 + (t_s // 60 + index) % 12),
                memory_temperature_c=float(70 + (t_s // 90 + index) % 10),
                pcie_gen_current=2,
                pcie_width_current=4,
            )
        )
    return RigSnapshot(
        taken_at=START + timedelta(seconds=t_s), monotonic_s=float(t_s), cards=tuple(snaps)
    )


def db_size_bytes(path: Path) -> int:
    """The database file plus its WAL and shared-memory files, after a checkpoint."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(
        p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()
    ) + (p.stat().st_size if (p := path.with_name(path.name + "-shm")).exists() else 0)


def count_rows(path: Path, table: str) -> int:
    """Rows in ``table`` (read with the sqlite3 module, outside the store)."""
    with sqlite3.connect(path) as conn:
        (n,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    conn.close()
    return int(n)


def time_chart(store: Store, uuid: str, end: datetime, runs: int) -> tuple[float, int]:
    """Median wall time (ms) of the 24 h chart query and its point count."""
    timings: list[float] = []
    points = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        chart = store.chart(uuid, end - timedelta(hours=24), end)
        timings.append((time.perf_counter() - t0) * 1000.0)
        points = len(chart.points)
    return statistics.median(timings), points


def run(days: float, cards: int, batch_polls: int, rollup_every_s: int, db: Path) -> int:
    """Write the history, then measure; exit status 0 when both targets are met."""
    total_s = int(days * 86400)
    print(
        f"store_growth: {days:g} days x {cards} cards at 1 Hz = {total_s * cards:,} sample rows; "
        f"batching: {batch_polls} polls ({batch_polls * cards} rows) per transaction via "
        f"record_samples_batch (one executemany); rollup_and_prune every {rollup_every_s} "
        f"simulated s, retention raw {DEFAULT_RAW_RETENTION_S / 3600:g} h, rollups "
        f"{DEFAULT_ROLLUP_RETENTION_S / 86400:g} days; db {db}",
        flush=True,
    )
    store = Store.open(f"sqlite:///{db}")
    started = time.perf_counter()
    insert_s = rollup_s = 0.0
    batch: list[RigSnapshot] = []
    next_report = 86400
    for t_s in range(total_s):
        batch.append(make_poll(t_s, cards))
        if len(batch) == batch_polls:
            t0 = time.perf_counter()
            store.record_samples_batch(batch)
            insert_s += time.perf_counter() - t0
            batch = []
        if (t_s + 1) % rollup_every_s == 0:
            if batch:
                store.record_samples_batch(batch)
                batch = []
            t0 = time.perf_counter()
            store.rollup_and_prune(now=START + timedelta(seconds=t_s + 1))
            rollup_s += time.perf_counter() - t0
        if t_s + 1 == next_report:
            elapsed = time.perf_counter() - started
            print(
                f"  day {(t_s + 1) // 86400:>3}: {elapsed:7.1f} s elapsed "
                f"(insert {insert_s:.1f} s, rollup+prune {rollup_s:.1f} s)",
                flush=True,
            )
            next_report += 86400
    if batch:
        store.record_samples_batch(batch)
    end = START + timedelta(seconds=total_s)
    store.rollup_and_prune(now=end)
    write_s = time.perf_counter() - started
    wal = db.with_name(db.name + "-wal")
    wal_mb = wal.stat().st_size / 1e6 if wal.exists() else 0.0  # while still open
    store.close()

    size_mb = db_size_bytes(db) / 1e6
    store = Store.open(f"sqlite:///{db}")
    uuid = make_poll(0, cards).cards[0].uuid
    chart_ms, points = time_chart(store, uuid, end, runs=7)
    store.close()
    raw_rows, rollup_rows = count_rows(db, "samples"), count_rows(db, "rollups_1m")

    print(
        f"wrote {total_s * cards:,} rows in {write_s:.1f} s "
        f"({total_s * cards / write_s:,.0f} rows/s; insert {insert_s:.1f} s, "
        f"rollup+prune {rollup_s:.1f} s)"
    )
    print(f"rows kept: samples {raw_rows:,} (raw window), rollups_1m {rollup_rows:,}")
    size_ok = size_mb < SIZE_TARGET_MB
    chart_ok = chart_ms < CHART_TARGET_MS
    print(
        f"db size (file + WAL after checkpoint): {size_mb:.1f} MB; WAL while open {wal_mb:.1f} MB "
        f"(target < {SIZE_TARGET_MB:g} MB: {'ok' if size_ok else 'MISSED'})"
    )
    print(
        f"24 h chart query, one card: median {chart_ms:.1f} ms of 7 runs, {points} points "
        f"(target < {CHART_TARGET_MS:g} ms: {'ok' if chart_ok else 'MISSED'})"
    )
    if days < 30:
        per_day_s = write_s / days
        print(
            f"extrapolation to 30 days: about {per_day_s * 30 / 60:.1f} min of writing; "
            f"size grows only by rollups after the 2-day raw window "
            f"(about {rollup_rows / max(days, 1e-9) * 30:,.0f} rollup rows at 30 days)"
        )
    return 0 if size_ok and chart_ok else 1


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=30.0, help="simulated days (default 30)")
    parser.add_argument("--cards", type=int, default=8, help="cards in the rig (default 8)")
    parser.add_argument(
        "--batch-polls", type=int, default=60, help="polls per transaction (default 60)"
    )
    parser.add_argument(
        "--rollup-every-s", type=int, default=600, help="simulated seconds between rollups"
    )
    parser.add_argument("--db", type=Path, help="database file (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if args.days <= 0 or args.cards <= 0 or args.batch_polls <= 0 or args.rollup_every_s <= 0:
        parser.error("--days, --cards, --batch-polls and --rollup-every-s must be positive")
    if args.db is not None:
        if args.db.exists():
            parser.error(f"--db {args.db} exists: give a new path")
        return run(args.days, args.cards, args.batch_polls, args.rollup_every_s, args.db)
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        return run(
            args.days, args.cards, args.batch_polls, args.rollup_every_s, Path(tmp) / "fleet.db"
        )


if __name__ == "__main__":
    sys.exit(main())
