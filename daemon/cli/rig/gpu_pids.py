"""Ask a running fleetd which pids hold ``/dev/nvidia*`` by right (fleetd, the engine tree).

``fleetctl check`` runs without the daemon, but on a serving rig fleetd and the engine's
workers hold the GPU devices: without their pids every serving rig would warn about
"foreign" processes. The question is quick and optional: no daemon (or one on another
machine, whose pids mean nothing here) means no exclusions beyond the built-in names.
"""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError, FleetClient, is_local_url

ASK_TIMEOUT_S = 1.0


def _pids(value: Any) -> set[int]:
    if not isinstance(value, list):
        return set()
    return {pid for pid in value if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0}


def running_daemon_pids(
    url: str, token: str | None, timeout_s: float = ASK_TIMEOUT_S
) -> tuple[set[int], set[int]]:
    """``(fleetd's pid, its engine's process tree)``; empty when no local fleetd answers."""
    if not is_local_url(url):
        return set(), set()
    try:
        doc = FleetClient(url=url, token=token, timeout_s=timeout_s).get("/api/v1/status")
    except (ClientError, ValueError):
        return set(), set()
    daemon = doc.get("daemon") if isinstance(doc, dict) else None
    if not isinstance(daemon, dict):
        return set(), set()
    own = _pids([daemon.get("pid")])
    return own, _pids(daemon.get("gpu_pids")) - own


def running_daemon_gpu_pids(
    url: str, token: str | None, timeout_s: float = ASK_TIMEOUT_S
) -> set[int]:
    """fleetd's pid and its engine's process tree, or nothing when no local fleetd answers."""
    own, engine = running_daemon_pids(url, token, timeout_s)
    return own | engine
