"""fleetctl commands for the reboot-required latch: ``reboot`` and ``clear-reboot-latch``.

``reboot`` without ``--confirm`` only explains what would happen (exit 0; a read, so
no token needed: ``GET /api/v1/recovery/reboot``). With it, fleetd stops the engine
cleanly and only then runs the configured reboot command (``--cold``:
``[recovery] power_cycle_command``; under ``--simulate``: the simulated reboot); an engine
that will not stop means no reboot (exit 4, with the reason), and so does ``--cold`` with
no power-cycle command configured (the line says how to do it by hand).
``clear-reboot-latch --reason TEXT`` is the recorded override.

The confirmed reboot's request lasts as long as the clean stop (up to twice
``[serving] stop_timeout_s``: minutes for a real engine), so it is not bound by the
client's usual 10 s: it runs in a thread while the main one shows the engine's state, and
Ctrl-C stops only the waiting (fleetd carries on, as it must: the stop is under way).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.engine.drain import describe as describe_drain
from daemon.cli.engine.serving import PIPE_PROGRESS_S, show_progress
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, Output
from daemon.cli.waiting import answer_while_waiting

PROGRESS_TIMEOUT_S = 2.0


def _post(out: Output, client: FleetClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        result: dict[str, Any] = client.post(path, body)
    except ClientError as exc:
        _fail_on(out, exc)
    return result


def _fail_on(out: Output, exc: ClientError) -> NoReturn:
    """The exit for a refused or failed request: 4 refused, 2 bad input, else 1."""
    if exc.status == 409:
        out.fail(f"refused: {exc}", EXIT_REFUSED)
    if exc.status in (400, 422):
        out.fail(str(exc), EXIT_BAD_INPUT)
    out.fail(str(exc), EXIT_FAILED)


def _confirmed_reboot(
    out: Output, client: FleetClient, timeout_s: float, cold: bool, force: bool
) -> dict[str, Any]:
    """POST the confirmed reboot and show the engine's state until fleetd answers."""
    watcher = dataclasses.replace(client, timeout_s=PROGRESS_TIMEOUT_S)
    try:
        watcher.status()  # a fleetd that is not there fails here, not "during the reboot"
    except ClientError as exc:
        out.fail(str(exc))
    shown = _Shown()

    def tick(started_s: float) -> None:
        try:
            status = watcher.status(with_log_text=True)
            serving = status["serving"]
        except (ClientError, KeyError, TypeError):
            return  # the progress line is a courtesy; the request's answer decides
        now_s, state = time.monotonic(), serving.get("state")
        line = serving.get("last_log_line")
        drain = status.get("drain") or {}
        if drain.get("draining") and state == "ready":  # the drain before the stop
            line = describe_drain(drain)
        if sys.stderr.isatty() or state != shown.state or now_s - shown.at_s >= PIPE_PROGRESS_S:
            show_progress(out, serving, started_s, line)
            shown.state, shown.at_s = state, now_s

    long_client = dataclasses.replace(client, timeout_s=timeout_s)
    try:
        result: dict[str, Any] = answer_while_waiting(
            out,
            lambda: long_client.post(
                "/api/v1/recovery/reboot",
                {"confirm": True, "cold": cold, **({"force": True} if force else {})},
            ),
            tick,
            "fleetd carries on with the reboot (the clean stop, then the reboot command); "
            "see fleetctl status",
        )
    except ClientError as exc:
        if exc.unreachable:
            out.fail(
                f"fleetd at {client.url} during the confirmed reboot: {exc.reason}; "
                "it may still be stopping the engine or rebooting (see fleetctl status, "
                "fleetctl events)"
            )
        _fail_on(out, exc)
    return result


def _explained_reboot(out: Output, client: FleetClient, cold: bool) -> dict[str, Any]:
    """What a reboot would do: a read, so no token is needed (an older fleetd: the POST)."""
    try:
        result: dict[str, Any] = client.get(
            "/api/v1/recovery/reboot", {"cold": "true"} if cold else None
        )
    except ClientError as exc:
        if exc.status != 405:
            _fail_on(out, exc)
        return _post(out, client, "/api/v1/recovery/reboot", {"confirm": False, "cold": cold})
    return result


@dataclass
class _Shown:
    """The progress line last printed into a pipe: its engine state and when."""

    state: str | None = None
    at_s: float = float("-inf")


def reboot(
    out: Output,
    client: FleetClient,
    confirm: bool,
    timeout_s: float,
    cold: bool = False,
    force: bool = False,
) -> int:
    """``fleetctl reboot [--confirm] [--cold] [--force] [--timeout S]``."""
    if confirm:
        result = _confirmed_reboot(out, client, timeout_s, cold, force)
    else:
        result = _explained_reboot(out, client, cold)
    what = "power cycle" if cold else "reboot"
    if out.json_mode:
        out.emit_json(result)
    elif confirm:
        out.line(f"{'power cycling' if cold else 'rebooting'}: {result['message']}")
    else:
        out.line(f"would {what}: {result['message']}")
        # The latch's rung picks the flags to run (a cold power cycle once it escalated).
        flags = result.get("advised") or ("--confirm --cold" if cold else "--confirm")
        out.line(f"nothing done; run `fleetctl reboot {flags}` to do it")
    return 0


def clear_latch(out: Output, client: FleetClient, reason: str) -> int:
    """``fleetctl clear-reboot-latch --reason TEXT``."""
    if not reason.strip():
        out.fail("--reason must say why the latch is cleared (it is recorded)", EXIT_BAD_INPUT)
    result = _post(out, client, "/api/v1/recovery/clear", {"reason": reason})
    if out.json_mode:
        out.emit_json(result)
    else:
        out.line(result["message"])
    return 0
