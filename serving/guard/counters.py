"""The guard's counters: one member each, with the series and help ``/metrics`` gives it.

The guard counts by member (``GuardStats.count``); fleetd reads the counts back by name
over the control socket and ``/metrics`` iterates ``GUARD_COUNTERS``, so a new counter is
one member plus its row (a test fails on a member without one), and it reaches
``/metrics`` without a second list.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


class GuardCounter(enum.StrEnum):
    """What the guard counts (the control document's ``counters`` keys)."""

    REQUESTS = "requests"
    UNAUTHORIZED = "unauthorized"
    PINNED = "pinned"
    MIRRORED = "mirrored"
    CAP_REFUSED = "cap_refused"
    CAP_WARNED = "cap_warned"
    CAP_ESTIMATED = "cap_estimated"
    ENGINE_UNAVAILABLE = "engine_unavailable"
    STREAMS_LOST = "streams_lost"
    NOT_FORWARDED = "not_forwarded"
    LOOPS_CUT = "loops_cut"
    STALE_REFUSED = "stale_refused"
    QUEUE_REFUSED = "queue_refused"
    DRAIN_REFUSED = "drain_refused"
    UNKNOWN_MODEL = "unknown_model"
    PROMPT_TOKENS = "prompt_tokens"
    COMPLETION_TOKENS = "completion_tokens"


@dataclass(frozen=True, slots=True)
class CounterRow:
    """``metric``: the plain counter on ``/metrics`` (None: exported another way)."""

    metric: str | None
    help: str


_COUNTERS = {
    GuardCounter.REQUESTS: CounterRow("cmpfleet_guard_requests", "Requests the guard received."),
    GuardCounter.UNAUTHORIZED: CounterRow(
        "cmpfleet_guard_unauthorized", "Requests refused for a missing or wrong key."
    ),
    GuardCounter.PINNED: CounterRow(
        "cmpfleet_guard_pinned_requests", "Requests the guard set a pinned field on."
    ),
    GuardCounter.MIRRORED: CounterRow(
        "cmpfleet_guard_mirrored_replies", "Replies whose reasoning field was mirrored."
    ),
    GuardCounter.CAP_REFUSED: CounterRow(
        "cmpfleet_guard_context_refused", "Requests refused over max_context_tokens."
    ),
    GuardCounter.CAP_WARNED: CounterRow(
        "cmpfleet_guard_context_warned", "Requests over the cap, flagged (warn mode)."
    ),
    GuardCounter.CAP_ESTIMATED: CounterRow(
        "cmpfleet_guard_context_estimated",
        "Prompts the context cap judged by estimate (the engine's tokenizer did not answer).",
    ),
    GuardCounter.ENGINE_UNAVAILABLE: CounterRow(
        "cmpfleet_guard_engine_unavailable",
        "Requests answered 503 because the engine did not answer.",
    ),
    GuardCounter.STREAMS_LOST: CounterRow(
        "cmpfleet_guard_streams_lost",
        "Streamed replies the engine broke off (ended with an error event).",
    ),
    GuardCounter.NOT_FORWARDED: CounterRow(
        "cmpfleet_guard_not_forwarded",
        "Requests for a path outside [guard] routes, answered 404 (never sent to the engine).",
    ),
    GuardCounter.LOOPS_CUT: CounterRow(
        "cmpfleet_guard_loops_cut",
        "Looping streams the guard ended, cancelling their engine request.",
    ),
    GuardCounter.STALE_REFUSED: CounterRow(
        "cmpfleet_guard_stale_refused",
        'Requests of stale sessions answered 409 (stale = "refuse").',
    ),
    GuardCounter.QUEUE_REFUSED: CounterRow(
        "cmpfleet_guard_queue_refused",
        "Requests answered 429 after waiting queue_timeout_s in the fair queue.",
    ),
    GuardCounter.DRAIN_REFUSED: CounterRow(
        "cmpfleet_guard_drain_refused",
        "Requests answered 503 draining while the rig drains (fleetctl drain, a reboot).",
    ),
    GuardCounter.UNKNOWN_MODEL: CounterRow(
        "cmpfleet_guard_unknown_model",
        "Requests for a model no engine of the rig serves, answered 404.",
    ),
    # Per client key and kind in cmpfleet_guard_tokens (the usage by key and hour).
    GuardCounter.PROMPT_TOKENS: CounterRow(None, "Prompt tokens the engine reported."),
    GuardCounter.COMPLETION_TOKENS: CounterRow(None, "Completion tokens the engine reported."),
}
GUARD_COUNTERS: Mapping[GuardCounter, CounterRow] = MappingProxyType(_COUNTERS)
