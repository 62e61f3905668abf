"""``fleetctl rollback [--to BUILD]``: serve the last build whose canaries passed, again.

fleetd picks the build (``daemon.engine.rollback``: the newest good build other than the
one serving, or ``--to``), and switches to its image by digest through the same gate,
preflight and recovery moves as ``fleetctl serve``; this follows the switch and the
start like ``serve`` does. Exit 0 serving it, 2 for an unknown build (naming the known
ones), 4 when refused (no good build, the start gate, a holder of the port or cards),
1 for a bare process (nothing moved: it prints what to run, from the build's provenance)
or a start that failed.
"""

from __future__ import annotations

import time
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.engine.profiles import follow_switch
from daemon.cli.engine.serving import wait_for
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, Output


def _post(out: Output, client: FleetClient, to: str | None, stop_foreign: bool) -> Any:
    try:
        return client.post("/api/v1/builds/rollback", {"to": to, "stop_foreign": stop_foreign})
    except ClientError as exc:
        if exc.status == 404:
            out.fail(f"rollback: {exc}", EXIT_BAD_INPUT)
        if exc.status == 409:
            out.fail(f"rollback refused: {exc}", EXIT_REFUSED)
        out.fail(str(exc), EXIT_FAILED)


def rollback(
    out: Output,
    client: FleetClient,
    to: str | None,
    wait: bool,
    timeout_s: float,
    stop_foreign: bool = False,
) -> int:
    """Ask fleetd to serve the last good build (or ``to``) and follow it to ready."""
    result: dict[str, Any] = _post(out, client, to, stop_foreign)
    name = str(result["build"]["name"])
    if result.get("manual"):
        if out.json_mode:
            out.emit_json(result)
        else:
            out.line(f"rollback to {name}: {result.get('instructions')}")
        return EXIT_FAILED
    serving = result.get("serving") or {}
    image = result.get("image")
    if result.get("already_active") or not wait:
        if out.json_mode:
            out.emit_json(result)
        elif result.get("already_active"):
            out.line(f"{name} already serving: engine {serving.get('state')}")
        else:
            out.line(f"rollback to {name} ({image}) requested (see fleetctl status)")
        return 0
    started_s = time.monotonic()
    switch = follow_switch(out, client, str(result["switch"]["id"]), timeout_s)
    if switch["phase"] == "refused":
        out.fail(f"rollback to {name} refused: {switch.get('message')}", EXIT_REFUSED)
    if switch["phase"] == "failed":
        out.fail(f"rollback to {name} failed: {switch.get('message')}", EXIT_FAILED)
    remaining_s = max(timeout_s - (time.monotonic() - started_s), 1.0)
    serving = wait_for(out, client, "start", remaining_s, started=True)
    if out.json_mode:
        out.emit_json({**result, "in_progress": False, "switch": switch, "serving": serving})
    else:
        out.line(
            f"{name}: profile {result.get('profile')} on {image}: engine {serving.get('state')} "
            f"(pid {serving.get('pid')})"
        )
    return 0
