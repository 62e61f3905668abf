"""Throughput baseline: single-stream decode and prefill tokens/s against the recipe's figures.

The power brake (PWRBRK#) runs every card at a quarter speed while ``/health`` says 200;
decode speed is where it shows first. Below 40% of the expected figure is a warning whose
advice names the brake first when the ``power_brake`` check is active, else thermal
throttling or the PCIe link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from serving.canary.copy import filler_text
from serving.canary.model import Outcome, Verdict

NAME = "throughput"
UNIT = "tok/s"
WARN_BELOW = 0.40
ADVICE_BRAKE = (
    "the power_brake check is active: the board holds PWRBRK# (pin B30) and every card runs "
    "at a quarter speed; fix the brake first (see fleetctl status), then re-run"
)
ADVICE_OTHER = (
    "no power brake seen: look for thermal throttling (fleetctl status temperatures, clocks) "
    "and a PCIe link below Gen2 x4 or a riser fault"
)
ADVICE_NO_EXPECTATION = (
    "the recipe has no expected_decode_tok_s/expected_prefill_tok_s: add them to compare"
)


def throughput_request(prompt_words: int, max_tokens: int) -> dict[str, Any]:
    """A streamed request with a fixed prompt and a fixed generation length."""
    return {
        "messages": [
            {
                "role": "user",
                "content": filler_text(prompt_words) + "\n\nContinue the story at length.",
            }
        ],
        "max_tokens": max_tokens,
        "ignore_eos": True,  # vLLM: generate exactly max_tokens
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@dataclass(frozen=True, slots=True)
class StreamTiming:
    """What one streamed request measured."""

    prompt_tokens: int
    completion_tokens: int
    first_token_s: float  # from sending to the first generated token
    decode_s: float  # from the first token to the last

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first, over the time they took."""
        if self.completion_tokens < 2 or self.decode_s <= 0:
            return None
        return (self.completion_tokens - 1) / self.decode_s

    @property
    def prefill_tok_s(self) -> float | None:
        """Prompt tokens over the time to the first token."""
        if self.prompt_tokens < 1 or self.first_token_s <= 0:
            return None
        return self.prompt_tokens / self.first_token_s


def _ratio(measured: float | None, expected: float | None) -> float | None:
    if measured is None or not expected:
        return None
    return measured / expected


def judge_throughput(
    timing: StreamTiming,
    expected_decode_tok_s: float | None,
    expected_prefill_tok_s: float | None,
    power_brake_active: bool,
) -> Verdict:
    """Figure: decode tok/s. Warn when decode or prefill is below 40% of expected."""
    decode, prefill = timing.decode_tok_s, timing.prefill_tok_s
    details: dict[str, Any] = {
        "decode_tok_s": None if decode is None else round(decode, 2),
        "prefill_tok_s": None if prefill is None else round(prefill, 1),
        "expected_decode_tok_s": expected_decode_tok_s,
        "expected_prefill_tok_s": expected_prefill_tok_s,
        "prompt_tokens": timing.prompt_tokens,
        "completion_tokens": timing.completion_tokens,
    }
    figure = None if decode is None else round(decode, 2)
    if decode is None:
        return Verdict(Outcome.WARN, None, "too few tokens streamed to time decode", "", details)
    parts = [f"decode {decode:.1f} tok/s"]
    if expected_decode_tok_s:
        parts[-1] += f" ({decode / expected_decode_tok_s:.0%} of {expected_decode_tok_s:g})"
    if prefill is not None:
        parts.append(f"prefill {prefill:.0f} tok/s")
        if expected_prefill_tok_s:
            parts[-1] += f" ({prefill / expected_prefill_tok_s:.0%} of {expected_prefill_tok_s:g})"
    message = ", ".join(parts)
    slow = [
        ratio
        for ratio in (
            _ratio(decode, expected_decode_tok_s),
            _ratio(prefill, expected_prefill_tok_s),
        )
        if ratio is not None and ratio < WARN_BELOW
    ]
    if slow:
        advice = ADVICE_BRAKE if power_brake_active else ADVICE_OTHER
        return Verdict(Outcome.WARN, figure, f"slow: {message}", advice, details)
    if not expected_decode_tok_s and not expected_prefill_tok_s:
        return Verdict(Outcome.PASS, figure, message, ADVICE_NO_EXPECTATION, details)
    return Verdict(Outcome.PASS, figure, message, "", details)
