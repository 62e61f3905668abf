"""One canary round: each canary in turn against an ``EngineApi``, never raising.

The round checks the engine's load before every canary and skips the rest of the round
when more than ``busy_running_requests`` requests are running (a canary must never slow a
user). Each canary has its own timeout; a timeout or an unreachable engine is a result,
not an exception, so one stuck canary does not block the next round or the daemon.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from serving.canary import copy, reasoning, throughput, toolcall
from serving.canary.client import (
    CanaryCallError,
    CanaryTimeout,
    CanaryUnreachable,
    EngineApi,
    first_message,
)
from serving.canary.model import CANARY_NAMES, CanaryResult, Outcome, Verdict
from serving.canary.settings import CanarySettings

METRICS_TIMEOUT_S = 5.0
ADVICE_TIMEOUT = "the engine is slow or stuck: see fleetctl status and fleetctl logs"
_UNITS = {
    copy.NAME: copy.UNIT,
    toolcall.NAME: toolcall.UNIT,
    reasoning.NAME: reasoning.UNIT,
    throughput.NAME: throughput.UNIT,
}
_CALL_ERROR_ADVICE = {
    copy.NAME: "the engine refused a plain chat request: see fleetctl logs",
    toolcall.NAME: toolcall.ADVICE,
    reasoning.NAME: reasoning.ADVICE_NONE,
    throughput.NAME: "the engine refused a streamed request: see fleetctl logs",
}


@dataclass(frozen=True, slots=True)
class Expectations:
    """The recipe's expected single-stream figures and reasoning field (``None``: not given).

    ``max_model_len`` bounds the deep round's depths; ``speculative`` is the recipe's
    speculative-decoding method (``None``: off), which makes drift at temperature 0 expected.
    """

    decode_tok_s: float | None = None
    prefill_tok_s: float | None = None
    reasoning_field: str | None = None
    max_model_len: int | None = None
    speculative: str | None = None


def busy_reason(api: EngineApi, settings: CanarySettings) -> str | None:
    """Why the engine is too busy for a canary now (more running than allowed), or ``None``."""
    running = api.running_requests(min(METRICS_TIMEOUT_S, settings.timeout_s))
    limit = settings.busy_running_requests
    if running is not None and running > limit:
        return f"engine busy: {running} requests running (more than {limit})"
    return None


class CanarySuite:
    """Runs rounds of the four canaries against one engine."""

    def __init__(
        self,
        api: EngineApi,
        settings: CanarySettings,
        expectations: Expectations,
        power_brake_active: Callable[[], bool],
        rng: random.Random | None = None,
    ) -> None:
        self._api = api
        self._settings = settings
        self._expectations = expectations
        self._power_brake_active = power_brake_active
        self._rng = rng or random.Random()  # noqa: S311 - test data, not secrets
        self._checks: dict[str, Callable[[], Verdict]] = {
            copy.NAME: self._copy_fidelity,
            toolcall.NAME: self._tool_calls,
            reasoning.NAME: self._reasoning_field,
            throughput.NAME: self._throughput,
        }

    def busy_reason(self) -> str | None:
        """Why the engine is too busy for a canary now, or ``None``."""
        return busy_reason(self._api, self._settings)

    def run_round(
        self, force: bool = False, names: tuple[str, ...] = CANARY_NAMES
    ) -> list[CanaryResult]:
        """Every canary once, in order; ``force`` runs even when the engine is busy."""
        results: list[CanaryResult] = []
        skip_reason: str | None = None
        for name in names:
            if skip_reason is None and not force:
                skip_reason = self.busy_reason()
            if skip_reason is not None:
                verdict = Verdict(Outcome.SKIPPED, None, skip_reason, "runs at the next round")
                results.append(CanaryResult.of(name, _UNITS[name], verdict, 0.0))
                continue
            results.append(self.run_one(name))
        return results

    def run_one(self, name: str) -> CanaryResult:
        """One canary, timed; errors become results."""
        started = time.monotonic()
        try:
            verdict = self._checks[name]()
        except CanaryTimeout as exc:
            verdict = Verdict(Outcome.WARN, None, f"timed out: {exc}", ADVICE_TIMEOUT)
        except CanaryUnreachable as exc:
            verdict = Verdict(Outcome.SKIPPED, None, str(exc), "runs when the engine is ready")
        except CanaryCallError as exc:
            verdict = Verdict(Outcome.FAIL, None, str(exc), _CALL_ERROR_ADVICE[name])
        return CanaryResult.of(name, _UNITS[name], verdict, time.monotonic() - started)

    # -- the canaries ------------------------------------------------------------------
    def _copy_once(self, filler_words: int) -> Verdict:
        expected = copy.make_identifiers(self._rng, self._settings.identifiers)
        body = {
            "messages": [{"role": "user", "content": copy.copy_prompt(expected, filler_words)}],
            "temperature": 0,
            "max_tokens": 16 * len(expected) + 64,
        }
        message = first_message(self._api.chat(body, self._settings.timeout_s))
        content = message.get("content")
        score = copy.score_copy(expected, content if isinstance(content, str) else "")
        context = f"behind {filler_words} filler words" if filler_words else ""
        return copy.judge_copy(score, context)

    def _copy_fidelity(self) -> Verdict:
        verdict = self._copy_once(0)
        if self._settings.filler_tokens > 0:
            verdict = copy.worse(verdict, self._copy_once(self._settings.filler_tokens))
        return verdict

    def _tool_calls(self) -> Verdict:
        document = self._api.chat(toolcall.tool_request(), self._settings.timeout_s)
        return toolcall.judge_tool_calls(first_message(document))

    def _reasoning_field(self) -> Verdict:
        document = self._api.chat(reasoning.reasoning_request(), self._settings.timeout_s)
        expected = self._expectations.reasoning_field
        return reasoning.judge_reasoning(first_message(document), expected or reasoning.STANDARD)

    def _throughput(self) -> Verdict:
        body = throughput.throughput_request(
            self._settings.throughput_prompt_tokens, self._settings.throughput_max_tokens
        )
        timing = self._api.stream_timing(body, self._settings.timeout_s)
        return throughput.judge_throughput(
            timing,
            self._expectations.decode_tok_s,
            self._expectations.prefill_tok_s,
            self._power_brake_active(),
        )
