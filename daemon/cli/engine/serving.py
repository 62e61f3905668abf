"""fleetctl commands for the engine: start, stop, restart, logs (recipes: ``cmd_recipe``).

``start`` and ``restart`` wait for readiness with a progress line (the engine's last log
line: cold starts take 20 to 45 minutes) unless ``--no-wait``; ``stop`` waits the same way.
The progress line shows only log lines newer than the request: the line the engine wrote
before it (hours ago, "Application startup complete.") would say nothing about the stop. A refused start (reboot
latch, critical check, lint error, port taken) exits 4 with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from daemon.cli.client import ClientError, FleetClient, token_refusal
from daemon.cli.output import (
    EXIT_FAILED,
    EXIT_REFUSED,
    Output,
)
from daemon.cli.waiting import end_progress, stopped_waiting

DONE_STATES = {"start": {"ready"}, "restart": {"ready"}, "stop": {"stopped", "failed"}}
BAD_STATES = frozenset({"failed", "held", "backoff"})
POLL_S = 1.0
PIPE_PROGRESS_S = 30.0


def engine_block(status: dict[str, Any], engine: str | None) -> dict[str, Any]:
    """The status block of ``engine`` (by its profile; None: the primary, ``serving``)."""
    if engine is not None:
        for block in status.get("engines") or []:
            if block.get("profile") == engine:
                found: dict[str, Any] = block
                return found
    serving: dict[str, Any] = status["serving"]
    return serving


def _post_action(
    out: Output,
    client: FleetClient,
    action: str,
    stop_foreign: bool = False,
    engine: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] | None = {"stop_foreign": True} if stop_foreign else None
    if engine is not None:
        body = {**(body or {}), "engine": engine}
    try:
        result: dict[str, Any] = client.post(f"/api/v1/serving/{action}", body)
    except ClientError as exc:
        if exc.status == 409:
            out.fail(f"{action} refused: {exc}", EXIT_REFUSED)
        out.fail(str(exc), EXIT_FAILED)
    for stopped in result.get("stopped_foreign", []):
        done = "stopped" if stopped["stopped"] else "could not stop"
        out.err.print(
            f"fleetctl: {done} foreign container {stopped['container']} "
            f"(image {stopped['image']}): "
            + "; ".join(" ".join(command) for command in stopped["commands"])
            + (f": {stopped['detail']}" if not stopped["stopped"] and stopped["detail"] else ""),
            markup=False,
        )
    for warning in result.get("warnings", []):
        out.err.print(f"fleetctl: warning: {warning['message']}", markup=False)
    return result


def _serving_before(
    client: FleetClient, engine: str | None = None
) -> tuple[str | None, str | None]:
    """The engine's last log line and its state's ``since`` now, before a request.

    ``since`` changes with every state the engine enters: a start or a restart that is over
    before the first poll (a warm simulated engine is ready in under a second) still shows
    as done, where waiting for a transition the poll never saw would wait out the timeout.
    None where the status cannot be read.
    """
    try:
        serving = engine_block(client.status(with_log_text=True), engine)
        line, since = serving.get("last_log_line"), serving.get("since")
    except (ClientError, KeyError, TypeError):
        return None, None
    return (line if isinstance(line, str) else None), (since if isinstance(since, str) else None)


def show_progress(out: Output, serving: dict[str, Any], started_s: float, line: str | None) -> None:
    """One progress line: rewritten in place on a terminal, a plain line into a pipe."""
    elapsed = int(time.monotonic() - started_s)
    text = f"[{elapsed // 60:d}:{elapsed % 60:02d}] engine {serving['state']}"
    text += f": {line}" if line else "..."
    if sys.stderr.isatty():
        width = out.err.width - 1
        out.err.file.write("\r" + text[:width].ljust(width))
        out.err.file.flush()
    else:
        out.err.print(text, markup=False)


def wait_for(
    out: Output,
    client: FleetClient,
    action: str,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    stale_line: str | None = None,
    started: bool = False,
    since_before: str | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """Poll the status until the action finished; fail with one line if it did not.

    ``stale_line`` is the engine's last log line before the request: it is not shown
    until the engine has written another one. ``started``: the start is known to have
    launched already (``serve`` after its switch), so ``ready`` is this start's.
    ``since_before``: the engine state's ``since`` before the request; a state entered
    after it is this action's even when the poll saw none of the states between.
    ``engine``: the engine followed, by its profile (None: the primary).
    """
    try:
        return _wait(
            out, client, action, timeout_s, sleep, stale_line, started, since_before, engine
        )
    except KeyboardInterrupt:
        stopped_waiting(out, f"fleetd carries on with the {action} (see fleetctl status)")


def _wait(
    out: Output,
    client: FleetClient,
    action: str,
    timeout_s: float,
    sleep: Callable[[float], None],
    stale_line: str | None,
    started: bool = False,
    since_before: str | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    started_s = time.monotonic()
    fresh_log = stale_line is None
    seen_transition = action == "stop" or started
    seen_starting = started
    last_state: str | None = None
    printed_s = float("-inf")
    while True:
        try:
            serving = engine_block(client.status(with_log_text=True), engine)
        except ClientError as exc:
            out.fail(str(exc), EXIT_FAILED)
        state = serving["state"]
        moved_on = since_before is not None and serving.get("since") != since_before
        if state in ("starting", "stopping") or moved_on:
            seen_transition = True
        seen_starting = seen_starting or state == "starting"
        if action != "stop" and (seen_starting or seen_transition) and state == "stopped":
            # The start failed or was stopped (a recovery stop, a refused relaunch); a
            # restart goes from stopping straight to starting, so stopped is its end too.
            refused = bool(serving.get("last_refusal"))
            out.fail(
                f"engine stopped: {serving.get('reason') or 'see fleetctl logs'}",
                EXIT_REFUSED if refused else EXIT_FAILED,
            )
        if seen_transition and state in DONE_STATES[action]:
            end_progress()
            return serving
        if seen_transition and state in BAD_STATES:
            end_progress()
            out.fail(f"engine is {state}: {serving.get('reason') or 'see fleetctl logs'}")
        # A terminal gets a live line; a pipe a line per state change or per half minute
        # (a 45-minute cold start must not write thousands of lines into a log).
        now_s = time.monotonic()
        line = serving.get("last_log_line") or None
        fresh_log = fresh_log or line != stale_line
        if sys.stderr.isatty() or state != last_state or now_s - printed_s >= PIPE_PROGRESS_S:
            show_progress(out, serving, started_s, line if fresh_log else None)
            last_state, printed_s = state, now_s
        if time.monotonic() - started_s > timeout_s:
            out.fail(
                f"engine still {state} after {timeout_s:.0f} s (it keeps going; see fleetctl status)"
            )
        sleep(POLL_S)


def action(
    out: Output,
    client: FleetClient,
    name: str,
    wait: bool,
    timeout_s: float,
    stop_foreign: bool = False,
    engine: str | None = None,
) -> int:
    """``start``/``stop``/``restart`` through the daemon (``--stop-foreign``: start only).

    ``engine``: the engine moved and followed, by its profile (None: the primary).
    """
    stale_line, since_before = _serving_before(client, engine) if wait else (None, None)
    if stop_foreign:  # fleetd answers once each foreign container's graceful stop is over
        client = dataclasses.replace(client, timeout_s=max(client.timeout_s, timeout_s))
    result = _post_action(out, client, name, stop_foreign, engine)
    serving = result.get("serving", {})
    if wait and not result.get("already_running"):
        serving = wait_for(
            out,
            client,
            name,
            timeout_s,
            stale_line=stale_line,
            since_before=since_before,
            engine=engine,
        )
        if serving["state"] == "failed":  # a stop that did not take: a person must act
            out.fail(f"engine {serving['state']}: {serving.get('reason') or 'see fleetctl logs'}")
    if out.json_mode:
        out.emit_json({**result, "serving": serving})
    elif not wait and not result.get("already_running"):
        out.line(f"engine {name} requested (see fleetctl status)")
    elif serving.get("pid"):
        url = serving.get("url") or ""
        out.line(f"engine {serving.get('state')} (pid {serving['pid']}) {url}".rstrip())
    else:
        out.line(f"engine {serving.get('state')}")
    return 0


def logs(
    out: Output, client: FleetClient, lines: int, follow: bool, engine: str | None = None
) -> int:
    """``fleetctl logs [NAME] [--follow] [--lines N]`` (``engine``: NAME, by its profile)."""
    params: dict[str, Any] = {"lines": lines}
    if engine is not None:
        params["engine"] = engine
    if not follow:
        try:
            got = client.get("/api/v1/serving/logs", params, needs_token=True)
        except ClientError as exc:
            out.fail(str(exc), EXIT_FAILED)
        if out.json_mode:
            out.emit_json(got["lines"])
        else:
            for line in got["lines"]:
                sys.stdout.write(line + "\n")
        return 0
    import httpx  # a stream that never ends: httpx's, imported only for this command

    url = client.url.rstrip("/") + "/api/v1/serving/logs/follow"
    # The engine log needs the token even on loopback: it goes along from the first try.
    headers = {"Authorization": f"Bearer {client.token}"} if client.token else {}
    try:
        with httpx.stream(
            "GET",
            url,
            params=params,
            headers=headers,
            timeout=httpx.Timeout(10, read=None),
        ) as response:
            if response.status_code in (401, 403):
                out.fail(
                    f"cannot follow the engine log: {token_refusal(response.status_code, client.token_source)}"
                )
            if response.status_code != 200:
                out.fail(f"cannot follow the engine log: HTTP {response.status_code}")
            for line in response.iter_lines():
                # --json: JSON Lines, one JSON string per log line (a stream that never
                # ends cannot be one document; each line parses on its own, as jq reads it).
                sys.stdout.write((json.dumps(line) if out.json_mode else line) + "\n")
                sys.stdout.flush()
    except httpx.HTTPError as exc:
        out.fail(f"lost fleetd at {client.url}: {exc.__class__.__name__}")
    return 0
