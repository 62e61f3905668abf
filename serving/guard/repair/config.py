"""``[guard.repair]``: which repairs the guard makes to agent traffic (each can be turned off)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# The owners' nudge (Schaka's 0021: typing "go" / "continue" into the stuck turn unsticks it).
NUDGE_TEXT = "continue"


class RepairSettings(BaseModel):
    """``[guard.repair]``.

    ``history = "clean"`` (default) cleans assistant turns of incoming requests; ``"off"``
    leaves them. ``salvage_tool_calls`` (opt-in) turns leaked DSML in replies into
    ``tool_calls``, buffering a stream at most ``salvage_max_chars`` from the first marker.
    ``loops = "cut"`` ends a looping stream and cancels its engine request (``"count"``:
    only counted); ``loop_nudge = "continue"`` re-asks once with the owners' nudge instead,
    at most ``nudges_per_hour`` times a session. ``stale`` marks (``"mark"``), refuses
    (``"refuse"``: 409) or ignores (``"off"``) a session begun under another build,
    profile or pin set.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    history: Literal["clean", "off"] = "clean"
    salvage_tool_calls: bool = False
    salvage_max_chars: Annotated[int, Field(ge=256, le=1_000_000)] = 16_384
    loops: Literal["cut", "count"] = "count"
    loop_nudge: Literal["", "continue"] = ""
    nudges_per_hour: Annotated[int, Field(ge=0, le=1000)] = 2
    stale: Literal["mark", "refuse", "off"] = "mark"
