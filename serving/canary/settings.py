"""The ``[canary]`` section of fleet.toml: schedule, busy threshold, sizes, log signatures.

Declared here (beside the canaries it tunes) and composed as is into the daemon's
``Settings``, like ``[serving]``. Defaults suit a real rig: a round every 30 minutes, the
40-identifier copy test, a 1,024-token prompt and 128 generated tokens for throughput.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Copy corruption was seen at 75k-92k tokens and loops from about 100k to 140k: the
# default depths straddle both, and a short one shows the build is fine where it should be.
DEFAULT_DEPTHS = (16_000, 64_000, 96_000, 128_000)
MAX_DEPTHS = 8
MIN_DEPTH = 1_000
MAX_DEPTH = 4_194_304


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def compiled_regex(value: str) -> str:
    """``value`` when it compiles as a regular expression; ValueError naming why otherwise."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class LogSignature(_Section):
    """One ``[[canary.log_signatures]]`` entry: a name and the regex that counts it."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=48)]
    regex: Annotated[str, Field(min_length=1)]

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return compiled_regex(value)


class CanarySettings(_Section):
    """``[canary]``: when rounds run and what they send.

    A round is skipped while the engine runs more than ``busy_running_requests``
    requests, so users are never slowed. ``filler_tokens > 0`` repeats the copy test
    behind that much filler context (corruption is long-range on some ports).
    ``log_signatures`` add to (or, by name, replace) the built-in signature table.
    The deep round runs every ``deep_interval_h`` hours at ``depths`` (tokens; a depth
    beyond the recipe's ``max_model_len`` is skipped), each request within
    ``deep_timeout_s`` and the round within ``deep_budget_s``; ``on_fail`` says what a
    failing round does besides the alert.
    """

    enabled: bool = True
    interval_s: Annotated[float, Field(gt=0, le=7 * 86400)] = 1800.0
    after_ready: bool = True
    busy_running_requests: Annotated[int, Field(ge=0, le=10000)] = 2
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    identifiers: Annotated[int, Field(ge=5, le=500)] = 40
    filler_tokens: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    throughput_prompt_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = 1024
    throughput_max_tokens: Annotated[int, Field(ge=8, le=100_000)] = 128
    log_signatures: list[LogSignature] = Field(default_factory=list)
    # The deep round (``serving.canary.deep``): copy, recall and loop at each depth, then
    # determinism. ``deep_interval_h = 0`` runs it only when asked (canary run --deep).
    depths: list[int] = Field(default_factory=lambda: list(DEFAULT_DEPTHS))
    deep_interval_h: Annotated[float, Field(ge=0, le=24 * 90)] = 24.0
    deep_budget_s: Annotated[float, Field(gt=0, le=6 * 3600)] = 1800.0
    deep_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 900.0
    recall_facts: Annotated[int, Field(ge=2, le=50)] = 8
    # What a failing round does besides alerting: ``restart`` asks recovery for one
    # engine restart per failing round, ``hold`` stops the engine until a person starts it.
    on_fail: Literal["alert", "restart", "hold"] = "alert"
    # ``restart``: after this many failing rounds in a row that each restarted the engine,
    # the next failing round holds it instead (counted by rounds, not by the breaker's window).
    restarts_in_a_row: Annotated[int, Field(ge=1, le=100)] = 3

    @field_validator("depths")
    @classmethod
    def _depths(cls, value: list[int]) -> list[int]:
        if not 1 <= len(value) <= MAX_DEPTHS:
            raise ValueError(f"give 1 to {MAX_DEPTHS} depths (tokens)")
        for depth in value:
            if not MIN_DEPTH <= depth <= MAX_DEPTH:
                raise ValueError(f"each depth is {MIN_DEPTH} to {MAX_DEPTH} tokens, got {depth}")
        return sorted(set(value))
