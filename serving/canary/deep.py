"""The deep round: copy, recall and loop at every depth of ``[canary] depths``, then determinism.

It runs on its own schedule (``deep_interval_h``, daily by default) and on ``fleetctl
canary run --deep``, only while the engine is idle by the short round's busy rule, checked
before every request (a user's request arriving mid-round skips the rest, and the round
is tried again later), and within a time budget (``deep_budget_s``; each request's timeout
is cut to what is left of it). Errors are results, never exceptions: a timeout warns at
that depth, an unreachable engine skips the rest, a prompt the engine refuses as longer
than its context skips that depth, any other refusal fails it.

Every canary of a round uses the same seeded filler at a given depth (the engine's prefix
cache may serve the repeats); the results carry one entry per depth (``details.depths``)
and the depth where each canary breaks (``details.breaks_at``).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any

from serving.canary import copy, determinism, loop, recall
from serving.canary.client import (
    CanaryCallError,
    CanaryTimeout,
    CanaryUnreachable,
    EngineApi,
    first_message,
)
from serving.canary.depth import DepthResult, combine, filler, filler_words_for, plan_depths
from serving.canary.model import DEEP_NAMES, CanaryResult, Outcome, Verdict
from serving.canary.settings import CanarySettings
from serving.canary.suite import ADVICE_TIMEOUT, Expectations, busy_reason

COPY_NAME = "copy_depth"
_UNITS = {
    COPY_NAME: copy.UNIT,
    recall.NAME: recall.UNIT,
    loop.NAME: loop.UNIT,
    determinism.NAME: determinism.UNIT,
}
# Words the engine's refusal of a too-long prompt uses (vLLM: "This model's maximum
# context length is N tokens"; "longer than the maximum model length").
_TOO_LONG = ("maximum context length", "maximum model length", "max_model_len", "too long")

Ask = Callable[[int, float], tuple[Verdict, int | None]]


def _content(document: dict[str, Any]) -> str:
    content = first_message(document).get("content")
    return content if isinstance(content, str) else ""


def _prompt_tokens(document: dict[str, Any]) -> int | None:
    usage = document.get("usage")
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return int(value) if isinstance(value, int | float) else None


class DeepRound:
    """One deep round against one engine (``run`` once)."""

    def __init__(
        self,
        api: EngineApi,
        settings: CanarySettings,
        expectations: Expectations,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._settings = settings
        self._expectations = expectations
        self._rng = rng or random.Random()  # noqa: S311 - test data, not secrets
        self._clock = clock
        self._seed = self._rng.randrange(1 << 31)
        self._deadline_s = 0.0
        self._force = False
        # Why the round stopped early (busy engine, engine gone); ``None`` when it did not.
        self.interrupted: str | None = None

    def run(self, force: bool = False) -> list[CanaryResult]:
        """Every deep canary once, in order; ``force`` runs even while the engine is busy."""
        self._force = force
        self._deadline_s = self._clock() + self._settings.deep_budget_s
        checks: dict[str, Callable[[], Verdict]] = {
            COPY_NAME: self._copy,
            recall.NAME: self._recall,
            loop.NAME: self._loop,
            determinism.NAME: self._determinism,
        }
        results: list[CanaryResult] = []
        for name in DEEP_NAMES:
            started = self._clock()
            verdict = checks[name]()
            results.append(CanaryResult.of(name, _UNITS[name], verdict, self._clock() - started))
        return results

    # -- pacing -------------------------------------------------------------------------
    def _stop_reason(self) -> str | None:
        """Why no more requests may be sent now, or ``None``."""
        if self.interrupted is not None:
            return self.interrupted
        if self._clock() >= self._deadline_s:
            return f"over the deep round's time budget ({self._settings.deep_budget_s:g} s)"
        if not self._force:
            busy = busy_reason(self._api, self._settings)
            if busy is not None:
                self.interrupted = busy
                return busy
        return None

    def _timeout_s(self) -> float:
        left = self._deadline_s - self._clock()
        return max(min(self._settings.deep_timeout_s, left), 1.0)

    def _guarded(
        self, ask: Callable[[float], tuple[Verdict, int | None]]
    ) -> tuple[Verdict, int | None]:
        """One request's verdict; its errors as verdicts (an unreachable engine interrupts)."""
        try:
            return ask(self._timeout_s())
        except CanaryTimeout as exc:
            return Verdict(Outcome.WARN, None, f"timed out: {exc}", ADVICE_TIMEOUT), None
        except CanaryUnreachable as exc:
            self.interrupted = str(exc)
            return Verdict(Outcome.SKIPPED, None, str(exc), "runs when the engine is ready"), None
        except CanaryCallError as exc:
            text = str(exc)
            if any(word in text.lower() for word in _TOO_LONG):
                return Verdict(
                    Outcome.SKIPPED, None, f"longer than the engine's context: {text}"
                ), None
            return Verdict(Outcome.FAIL, None, text, "see fleetctl logs"), None

    def _at_depths(self, what: str, ask: Ask, reply_tokens: int) -> Verdict:
        usable, skipped = plan_depths(
            self._settings.depths, self._expectations.max_model_len, reply_tokens
        )
        results: list[DepthResult] = []
        for depth in usable:
            why = self._stop_reason()
            if why is not None:
                results.append(DepthResult(depth, Verdict(Outcome.SKIPPED, None, why)))
                continue
            started = self._clock()
            verdict, prompt_tokens = self._guarded(functools.partial(ask, depth))
            results.append(DepthResult(depth, verdict, prompt_tokens, self._clock() - started))
        return combine(what, results, skipped)

    def _passage(self, depth: int) -> str:
        return filler(filler_words_for(depth), self._seed + depth)

    # -- the canaries -------------------------------------------------------------------
    def _copy(self) -> Verdict:
        count = self._settings.identifiers

        def ask(depth: int, timeout_s: float) -> tuple[Verdict, int | None]:
            expected = copy.make_identifiers(self._rng, count)
            body = {
                "messages": [
                    {
                        "role": "user",
                        "content": copy.copy_prompt(expected, passage=self._passage(depth)),
                    }
                ],
                "temperature": 0,
                "max_tokens": 16 * count + 64,
            }
            document = self._api.chat(body, timeout_s)
            score = copy.score_copy(expected, _content(document))
            return copy.judge_copy(score), _prompt_tokens(document)

        return self._at_depths("copy", ask, 16 * count + 64)

    def _recall(self) -> Verdict:
        count = self._settings.recall_facts

        def ask(depth: int, timeout_s: float) -> tuple[Verdict, int | None]:
            facts = recall.make_facts(self._rng, count)
            body = recall.recall_request(facts, depth, self._seed + depth)
            document = self._api.chat(body, timeout_s)
            return recall.judge_recall(recall.score_recall(facts, _content(document))), (
                _prompt_tokens(document)
            )

        return self._at_depths("recall", ask, 16 * count + 32)

    def _loop(self) -> Verdict:
        def ask(depth: int, timeout_s: float) -> tuple[Verdict, int | None]:
            document = self._api.chat(loop.loop_request(depth, self._seed + depth), timeout_s)
            return loop.judge_loop(first_message(document)), _prompt_tokens(document)

        return self._at_depths("tool call", ask, 256)

    def _determinism(self) -> Verdict:
        replies: list[str] = []
        for _ in range(2):
            why = self._stop_reason()
            if why is not None:
                return Verdict(Outcome.SKIPPED, None, why, "runs at the next deep round")

            def ask(timeout_s: float) -> tuple[Verdict, int | None]:
                document = self._api.chat(determinism.determinism_request(), timeout_s)
                replies.append(_content(document))
                return Verdict(Outcome.PASS, None, ""), None

            verdict, _ = self._guarded(ask)
            if verdict.result is not Outcome.PASS:
                return verdict
        return determinism.judge_determinism(replies[0], replies[1], self._expectations.speculative)
