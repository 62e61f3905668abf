"""fleetctl commands for launch profiles: ``profiles`` and ``serve NAME``.

``serve`` asks fleetd to stop the running engine cleanly and start profile NAME, then
follows the switch in the status document (``serving.switch``) and the new engine's
start like ``fleetctl start`` does, a progress line at a time. An unknown name exits 2
naming the known profiles; a refusal (the reboot latch, NAME's lint errors, the start
gate, a foreign holder of its port or cards) exits 4 with every reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.engine.serving import POLL_S, show_progress, wait_for
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, Output
from daemon.cli.views.listview import ListColumn
from daemon.cli.waiting import end_progress, stopped_waiting

ENDED_PHASES = frozenset({"done", "refused", "failed"})


def profiles(out: Output, client: FleetClient) -> int:
    """``fleetctl profiles``: each profile, the one in force marked, its lint verdict."""
    try:
        document: dict[str, Any] = client.get("/api/v1/serving/profiles")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(document)
        return 0
    rows = document["profiles"]
    out.table(
        None,
        [
            ListColumn("profile", 0),
            ListColumn("lint", 1),
            ListColumn("gpus", 2),
            ListColumn("mode", 4),
            ListColumn("serves", 5),
            ListColumn("in force", 3, flex=True),
            ListColumn("from", below=True),
        ],
        [
            [
                f"{'*' if row['active'] else ' '} {row['name']}",
                lint_words(row["lint"]),
                str(row["gpus"]),
                str(row["mode"]),
                str(row["served_model_name"] or "-"),
                _marks(row),
                str(row["source"]),
            ]
            for row in rows
        ],
    )
    return 0


def lint_words(lint: dict[str, Any]) -> str:
    """``clean``, ``1 warning``, ``2 errors, 1 warning``: the lint verdict in words."""
    counts = []
    for kind in ("errors", "warnings", "notes"):
        n = int(lint.get(kind) or 0)
        if n:
            counts.append(f"{n} {kind if n > 1 else kind[:-1]}")
    return ", ".join(counts) if counts else str(lint.get("verdict", "clean"))


def _marks(row: dict[str, Any]) -> str:
    """``active, autostart``: the profile in force, the one the config autostarts."""
    marks = ["active"] if row["active"] else []
    if row["configured"]:
        marks.append("autostart")
    return ", ".join(marks) or "-"


def _post_switch(out: Output, client: FleetClient, name: str, stop_foreign: bool) -> Any:
    try:
        return client.post(
            "/api/v1/serving/switch", {"profile": name, "stop_foreign": stop_foreign}
        )
    except ClientError as exc:
        if exc.status == 404:
            out.fail(f"serve {name}: {exc}", EXIT_BAD_INPUT)
        if exc.status == 409:
            out.fail(f"serve {name} refused: {exc}", EXIT_REFUSED)
        out.fail(str(exc), EXIT_FAILED)


def follow_switch(
    out: Output,
    client: FleetClient,
    switch_id: str,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll the status until switch ``switch_id`` has ended; its last progress."""
    started_s = time.monotonic()
    last: tuple[str, str | None] | None = None
    try:
        while True:
            try:
                serving: dict[str, Any] = client.status()["serving"]
            except ClientError as exc:
                out.fail(str(exc), EXIT_FAILED)
            switch = serving.get("switch") or {}
            if switch.get("id") == switch_id and switch.get("phase") in ENDED_PHASES:
                end_progress()
                return dict(switch)
            shown = (str(serving.get("state")), serving.get("last_log_line"))
            if shown != last:
                prefix = f"{switch.get('previous', '?')} -> {switch.get('profile', '?')}"
                show_progress(out, serving, started_s, f"{prefix}: {shown[1] or '...'}")
                last = shown
            if time.monotonic() - started_s > timeout_s:
                out.fail(f"the switch is still going after {timeout_s:.0f} s (see fleetctl status)")
            sleep(POLL_S)
    except KeyboardInterrupt:
        stopped_waiting(out, "fleetd carries on with the switch (see fleetctl status)")


def serve(
    out: Output,
    client: FleetClient,
    name: str,
    wait: bool,
    timeout_s: float,
    stop_foreign: bool = False,
) -> int:
    """``fleetctl serve NAME``: stop cleanly, switch to NAME, start it, wait for ready."""
    result: dict[str, Any] = _post_switch(out, client, name, stop_foreign)
    serving = result.get("serving", {})
    if result.get("already_active"):
        if wait and serving.get("state") != "ready":
            since = serving.get("since")  # not ready yet: any state after this one is news
            serving = wait_for(
                out,
                client,
                "start",
                timeout_s,
                since_before=since if isinstance(since, str) else None,
            )
        if out.json_mode:
            out.emit_json({**result, "serving": serving})
        else:
            out.line(f"profile {name} already in force: engine {serving.get('state')}")
        return 0
    if not wait:
        if out.json_mode:
            out.emit_json(result)
        else:
            out.line(f"switching to profile {name} requested (see fleetctl status)")
        return 0
    started_s = time.monotonic()
    switch = follow_switch(out, client, str(result["switch"]["id"]), timeout_s)
    if switch["phase"] == "refused":
        out.fail(f"serve {name} refused: {switch.get('message')}", EXIT_REFUSED)
    if switch["phase"] == "failed":
        out.fail(f"serve {name} failed: {switch.get('message')}", EXIT_FAILED)
    remaining_s = max(timeout_s - (time.monotonic() - started_s), 1.0)
    serving = wait_for(out, client, "start", remaining_s, started=True)
    if out.json_mode:
        out.emit_json({**result, "in_progress": False, "switch": switch, "serving": serving})
    else:
        url = serving.get("url") or ""
        out.line(
            f"profile {name}: engine {serving.get('state')} (pid {serving.get('pid')}) {url}".rstrip()
        )
    return 0
