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


def faster(directory: Path, name: str, factor: float = 10.0) -> Path:
    """Built-in scenario ``name`` with its simulated engine ``factor`` times faster in wall time.

    The engine's pace and its time scale change together (``serving.sim.perf``), so a bench
    reports the same real-rig figures in a tenth of the time.
    """
    text = (resources.files("hwcheck.sim") / "scenarios" / f"{name}.toml").read_text("utf-8")
    from serving.sim.scenario import EngineScenario

    defaults = EngineScenario()
    decode = float(_value(text, "tokens_per_s") or defaults.tokens_per_s)
    prefill = float(_value(text, "prefill_tokens_per_s") or defaults.prefill_tokens_per_s)
    text = re.sub(r"(?m)^(tokens_per_s|prefill_tokens_per_s|time_scale) = .*$\n", "", text)
    keys = (
        f"tokens_per_s = {decode * factor}\n"
        f"prefill_tokens_per_s = {prefill * factor}\n"
        f"time_scale = {defaults.time_scale / factor}\n"
    )
    if re.search(r"(?m)^\[engine\]$", text):
        text = re.sub(r"(?m)^\[engine\]$\n", "[engine]\n" + keys, text, count=1)
    else:
        text += "\n[engine]\n" + keys
    path = directory / f"{name}-faster.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _value(text: str, key: str) -> str | None:
    match = re.search(rf"(?m)^{key} = ([0-9.]+)$", text)
    return None if match is None else match[1]
