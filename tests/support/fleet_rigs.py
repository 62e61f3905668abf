"""Test helpers shared across test modules (once in tests.fleet.conftest).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.fleetd import Fleetd

XID_CARD = 1


@dataclass(frozen=True)
class TwoRigs:
    """``healthy`` (every check passes) and ``xid`` (an Xid 31 on card 1 after start)."""

    healthy: Fleetd
    xid: Fleetd


def write_fleet_file(path: Path, rigs: dict[str, str], **token_files: str) -> Path:
    """A fleet file with ``[rigs.NAME] url = ...`` (and ``token_file`` where given)."""
    lines = []
    for name, url in rigs.items():
        lines += [f"[rigs.{name}]", f'url = "{url}"']
        if name in token_files:
            lines.append(f'token_file = "{token_files[name]}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
