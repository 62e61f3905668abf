"""Built-in scenarios on a shorter clock, for tests that wait on their timeline.

``xid31`` fires its Xid 31 about 20 s after the simulated boot, a pace meant for a person
watching the dashboard. A test of what follows the Xid gets the same scenario file with its
timeline brought forward, so it waits ~2 s instead of ~20 s for the same events.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path


def sooner(directory: Path, name: str, at_s: float = 2.0) -> Path:
    """Built-in scenario ``name`` written to ``directory`` with every timeline step at ``at_s``.

    Only the steps' times change (every ``at_s = N`` line); the rest of the file is the
    built-in's, so the rig, the cards and the faults are exactly the scenario's.
    """
    text = (resources.files("hwcheck.sim") / "scenarios" / f"{name}.toml").read_text("utf-8")
    faster, count = re.subn(r"(?m)^at_s = [0-9.]+$", f"at_s = {at_s}", text)
    assert count, f"scenario {name} has no timeline to bring forward"
    path = directory / f"{name}-sooner.toml"
    path.write_text(faster, encoding="utf-8")
    return path
