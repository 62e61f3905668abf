"""``fleetctl bench``, ``bench show [ID]``, ``bench list``: run the matrix, follow it, print it.

A run starts in fleetd (``POST /api/v1/bench``) and fleetctl follows it, drawing a progress
bar on stderr when that is a terminal. Ctrl-C asks fleetd to stop the run (the cell under
way dropped, the finished ones kept; a sweep puts the caps back), waits for that, prints
what was kept and exits 130; a second Ctrl-C leaves at once. Exit 0 for a finished run, 4
when refused (the latch, the engine not ready, another run), 2 for a bad axis or cap.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.engine.bench_view import list_lines, run_lines
from daemon.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    EXIT_UNKNOWN,
    Output,
)
from serving.bench.matrix import BadAxis, parse_depth
from serving.bench.sweep import parse_sweep

POLL_S = 0.5
BAR_WIDTH = 24


@dataclass(frozen=True, slots=True)
class BenchArgs:
    """The flags of ``fleetctl bench``."""

    quick: bool = False
    cap_sweep: str | None = None
    concurrency: str | None = None
    depths: str | None = None
    temperatures: str | None = None
    output_tokens: int | None = None

    def body(self) -> dict[str, Any]:
        """The request body (``ValueError`` with one line for a bad flag)."""
        body: dict[str, Any] = {"quick": self.quick}
        if self.cap_sweep is not None:
            parse_sweep(self.cap_sweep)
            body["cap_sweep"] = self.cap_sweep
        if self.concurrency:
            try:
                body["concurrency"] = [int(v) for v in self.concurrency.split(",")]
            except ValueError:
                raise ValueError(f"--concurrency {self.concurrency!r}: expected 1,8,64") from None
        if self.depths:
            try:
                body["depths"] = [parse_depth(v) for v in self.depths.split(",")]
            except BadAxis as exc:
                raise ValueError(f"--depths: {exc}") from None
        if self.temperatures:
            try:
                body["temperatures"] = [float(v) for v in self.temperatures.split(",")]
            except ValueError:
                raise ValueError(f"--temperatures {self.temperatures!r}: expected 0,1") from None
        if self.output_tokens is not None:
            body["output_tokens"] = self.output_tokens
        return body


def _fail_for(out: Output, exc: ClientError) -> int:
    if exc.unreachable:
        out.fail(str(exc), EXIT_UNKNOWN)
    if exc.status in (409, 429):
        out.fail(str(exc), EXIT_REFUSED)
    if exc.status in (400, 422):
        out.fail(str(exc), EXIT_BAD_INPUT)
    out.fail(str(exc), EXIT_FAILED)


def _bar(run: dict[str, Any], started_s: float) -> None:
    progress = run.get("progress") or {}
    if not sys.stderr.isatty() or not progress:
        return
    done, total = int(progress.get("done", 0)), max(int(progress.get("total", 1)), 1)
    filled = BAR_WIDTH * done // total
    elapsed = int(time.monotonic() - started_s)
    text = (
        f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} "
        f"{progress.get('current') or ''} {elapsed // 60}:{elapsed % 60:02d}"
    )
    if progress.get("stopping"):
        text += " stopping..."
    sys.stderr.write(text[:79].ljust(79))
    sys.stderr.flush()


def _follow(client: FleetClient, run_id: int) -> tuple[dict[str, Any], bool]:
    """Poll until the run ends; (its document, whether Ctrl-C stopped it)."""
    started_s = time.monotonic()
    interrupted = False
    while True:
        try:
            run: dict[str, Any] = client.get(f"/api/v1/bench/{run_id}")
            _bar(run, started_s)
            if run.get("state") != "running":
                return run, interrupted
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            if sys.stderr.isatty():
                sys.stderr.write("\nstopping the bench (the finished cells are kept)...\n")
            client.post(f"/api/v1/bench/{run_id}/stop")


def run(out: Output, client: FleetClient, args: BenchArgs) -> int:
    """Start a run, follow it, print it."""
    try:
        body = args.body()
    except ValueError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    try:
        started: dict[str, Any] = client.post("/api/v1/bench", body)
        for warning in (started.get("method") or {}).get("warnings") or []:
            sys.stderr.write(f"warning: {warning}\n")
        try:
            document, interrupted = _follow(client, int(started["id"]))
        except KeyboardInterrupt:
            if sys.stderr.isatty():
                sys.stderr.write("\n")
            out.fail(
                f"stopped waiting: bench run {started['id']} is being stopped by fleetd",
                EXIT_INTERRUPTED,
            )
    except ClientError as exc:
        return _fail_for(out, exc)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    _print(out, document)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if document.get("state") == "failed" else 0


def _print(out: Output, document: dict[str, Any]) -> None:
    if out.json_mode:
        out.emit_json(document)
        return
    for line in run_lines(document):
        out.line(line)


def show(out: Output, client: FleetClient, run_id: int | None) -> int:
    """``bench show [ID]``: a run's tables (the newest by default)."""
    try:
        if run_id is None:
            runs = client.get("/api/v1/bench", {"limit": 1}).get("runs") or []
            if not runs:
                out.fail("no bench run yet: run fleetctl bench", EXIT_REFUSED)
            run_id = int(runs[0]["id"])
        document: dict[str, Any] = client.get(f"/api/v1/bench/{run_id}")
    except ClientError as exc:
        return _fail_for(out, exc)
    _print(out, document)
    return 0


def listing(out: Output, client: FleetClient, limit: int) -> int:
    """``bench list``: the runs per build."""
    try:
        document: dict[str, Any] = client.get("/api/v1/bench", {"limit": limit})
    except ClientError as exc:
        return _fail_for(out, exc)
    if out.json_mode:
        out.emit_json(document)
        return 0
    for line in list_lines(document):
        out.line(line)
    return 0
