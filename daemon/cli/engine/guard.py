"""``fleetctl guard key NAME`` and ``fleetctl guard usage``: the traffic guard's keys and accounts.

``key`` runs locally (no daemon): it makes a key, prints it once, and prints the
``[[guard.keys]]`` table to paste into the config, which holds only the salted hash. The key
is never written anywhere by fleetctl. ``usage`` reads ``GET /api/v1/guard/usage``.
"""

from __future__ import annotations

import sys
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_UNKNOWN, Output
from serving.guard.keys import UnusableKey, hash_key, new_key


def key(out: Output, name: str, from_stdin: bool) -> int:
    """Make (or read from stdin) a key; show it once with its config table."""
    if not name or any(not (c.isalnum() or c in "_.-") for c in name) or len(name) > 64:
        out.fail(f"key name {name!r}: letters, digits, '_', '.' and '-' (at most 64)", 2)
    secret = sys.stdin.readline().strip() if from_stdin else new_key()
    try:
        hashed = hash_key(secret)
    except UnusableKey as exc:
        out.fail(str(exc), 2)
    table = f'[[guard.keys]]\nname = "{name}"\nsha256 = "{hashed}"\n'
    if out.json_mode:
        out.emit_json({"name": name, "key": None if from_stdin else secret, "sha256": hashed})
        return 0
    if not from_stdin:
        out.line(f"key for {name} (shown once; give it to the client as its API key):")
        out.line(secret)
        out.line("")
    out.line("add to the config (fleet.toml), then restart fleetd:")
    out.write(table)
    return 0


def usage(out: Output, client: FleetClient, hours: int) -> int:
    """Tokens per key and hour."""
    try:
        rows: list[dict[str, Any]] = client.get("/api/v1/guard/usage", {"hours": hours})
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN)
    if out.json_mode:
        out.emit_json(rows)
        return 0
    out.table(
        f"guard usage, last {hours} h",
        ["hour", "key", "requests", "prompt tokens", "completion tokens"],
        [
            [
                str(row["hour"]),
                str(row["key"]),
                str(row["requests"]),
                str(row["prompt_tokens"]),
                str(row["completion_tokens"]),
            ]
            for row in rows
        ],
    )
    return 0
