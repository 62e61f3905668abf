"""``fleetctl guard key NAME``, ``guard usage``, ``guard sessions``: the guard's keys and accounts.

``key`` runs locally (no daemon): it makes a key, prints it once, and prints the
``[[guard.keys]]`` table to paste into the config, which holds only the salted hash. The key
is never written anywhere by fleetctl. ``usage`` reads ``GET /api/v1/guard/usage`` (tokens
and repairs per key and hour); ``sessions`` reads ``GET /api/v1/guard`` (each session's
depth, cleaned turns, repairs and stale mark).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_UNKNOWN, Output
from serving.guard.keys import MAX_KEY_CHARS, UnusableKey, hash_key, new_key

KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # [[guard.keys]] name's own rule


def key(out: Output, name: str, from_stdin: bool) -> int:
    """Make (or read from stdin) a key; show it once with its config table.

    The name is checked as fleetd checks ``[[guard.keys]] name`` (ASCII only: a table
    fleetd then refused was printed for ``é``), and a key from stdin is one bounded line of
    UTF-8 (an unbounded line, NUL bytes and invalid UTF-8 got through or tracebacked).
    """
    if not KEY_NAME.fullmatch(name):
        out.fail(f"key name {name!r}: ASCII letters, digits, '_', '.' and '-' (at most 64)", 2)
    secret = _read_key(out) if from_stdin else new_key()
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


def _read_key(out: Output) -> str:
    """One line from stdin, at most ``MAX_KEY_CHARS`` (plus its newline), as UTF-8."""
    raw = sys.stdin.buffer.readline(MAX_KEY_CHARS + 2)
    if len(raw.rstrip(b"\r\n")) > MAX_KEY_CHARS:
        out.fail(f"the key on stdin is over {MAX_KEY_CHARS} characters", 2)
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        out.fail("the key on stdin is not UTF-8 text", 2)


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
        ["hour", "key", "requests", "prompt tokens", "completion tokens", "repairs"],
        [
            [
                str(row["hour"]),
                str(row["key"]),
                str(row["requests"]),
                str(row["prompt_tokens"]),
                str(row["completion_tokens"]),
                _counts(row.get("repairs")),
            ]
            for row in rows
        ],
    )
    return 0


def _counts(counts: object) -> str:
    if not isinstance(counts, dict) or not counts:
        return "-"
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))


def sessions(out: Output, client: FleetClient) -> int:
    """The last hour's sessions: depth, cleaned turns, repairs, stale mark."""
    try:
        guard: dict[str, Any] = client.get("/api/v1/guard")
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN)
    rows = list(guard.get("sessions") or [])
    if out.json_mode:
        out.emit_json(rows)
        return 0
    queue = guard.get("queue") or {}
    out.table(
        f"guard sessions, last hour (queue: {queue.get('depth', 0)} waiting)",
        ["session", "key", "depth tokens", "requests", "cleaned turns", "repairs", "stale"],
        [
            [
                str(row["id"]),
                str(row["key"]),
                str(row.get("depth_tokens", 0)),
                str(row.get("requests", 0)),
                str(row.get("cleaned_turns", 0)),
                _counts(row.get("repairs")),
                "STALE" if row.get("stale") else "",
            ]
            for row in rows
        ],
    )
    return 0
