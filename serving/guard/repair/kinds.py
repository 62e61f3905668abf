"""What a repair did: the names of the ``x-cmpfleet-repaired`` header and the counters."""

from __future__ import annotations

import enum


class Repair(enum.StrEnum):
    """One repair (a counter's label and an item of ``x-cmpfleet-repaired``)."""

    HISTORY = "history"  # assistant turns of the request cleaned
    SALVAGED = "salvaged"  # leaked markup in the reply became ``tool_calls``
    SALVAGE_REFUSED = "salvage_refused"  # markup left as text (the reason is counted too)
    LOOP_CUT = "loop_cut"  # a looping stream ended and its engine request cancelled
    NUDGED = "nudged"  # a cut loop re-asked with the owners' "continue"
    STALE = "stale"  # the session began under another build, profile or pin set


def header_value(done: list[Repair]) -> bytes:
    """``x-cmpfleet-repaired``'s value: the repairs, in order, each once."""
    return ",".join(dict.fromkeys(str(item) for item in done)).encode()
