"""Deep prompts and per-depth verdicts: the shared half of the deep canaries.

The builds of the field notes fail deep in a context and nowhere else (copies corrupted
at 75k-92k tokens, "Let me..." loops from about 100k, recall falling with length), so the
copy, recall and loop canaries each run once per depth of ``[canary] depths`` and report
a figure per depth: the curve the dashboard draws and the depth where it breaks.

A depth is a context length in tokens. The filler that makes it is plain prose generated
from a seed and a length (about 4/3 tokens per English word, 4 characters per token), so
a round's prompts are the same for the same seed and cost nothing to store. The engine's
own count (``usage.prompt_tokens``) is recorded beside each depth.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from serving.canary.model import Outcome, Verdict

TOKENS_PER_WORD = 4 / 3
# A depth whose prompt (with this margin for the estimate) and reply would not fit the
# engine's context is skipped, not sent.
ESTIMATE_MARGIN = 1.05
_ADJECTIVES = (
    "quiet", "grey", "narrow", "old", "bright", "cold", "wide", "slow", "green", "small",
    "long", "warm", "pale", "busy", "still", "dark",
)  # fmt: skip
_NOUNS = (
    "harbor", "boat", "market", "road", "river", "bridge", "field", "house", "tower",
    "garden", "window", "hill", "street", "wall", "forest", "station", "ship", "village",
)  # fmt: skip
_VERBS = (
    "rested", "waited", "stood", "turned", "leaned", "faded", "shone", "drifted", "settled",
    "opened", "closed", "glowed",
)  # fmt: skip
_PLACES = ("near", "beside", "under", "behind", "above", "across", "along", "past")


def filler_words_for(tokens: int) -> int:
    """Words of filler that make about ``tokens`` tokens."""
    return max(round(tokens / TOKENS_PER_WORD), 0)


def filler(words: int, seed: int) -> str:
    """About ``words`` words of plain prose (no digits, no code-like words), from ``seed``."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    out: list[str] = []
    while len(out) < words:
        out += [
            "The",
            rng.choice(_ADJECTIVES),
            rng.choice(_NOUNS),
            rng.choice(_VERBS),
            rng.choice(_PLACES),
            "the",
            rng.choice(_ADJECTIVES),
            rng.choice(_NOUNS) + ".",
        ]
    return " ".join(out[:words])


def depth_label(depth: int) -> str:
    """``16k`` for 16,000 tokens (``1.5k``; ``800`` below a thousand)."""
    if depth < 1000:
        return str(depth)
    return f"{depth / 1000:g}k"


def plan_depths(
    depths: Sequence[int], max_model_len: int | None, reply_tokens: int
) -> tuple[list[int], list[tuple[int, str]]]:
    """The depths that fit the engine's context, and the others with why."""
    usable: list[int] = []
    skipped: list[tuple[int, str]] = []
    for depth in sorted(set(depths)):
        needed = round(depth * ESTIMATE_MARGIN) + reply_tokens
        if max_model_len is not None and needed > max_model_len:
            skipped.append(
                (depth, f"above the recipe's max_model_len {max_model_len} (needs ~{needed})")
            )
        else:
            usable.append(depth)
    return usable, skipped


@dataclass(frozen=True, slots=True)
class DepthResult:
    """One canary at one depth."""

    depth: int
    verdict: Verdict
    prompt_tokens: int | None = None
    duration_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The entry of ``details.depths``."""
        return {
            "depth": self.depth,
            "result": self.verdict.result.value,
            "figure": self.verdict.figure,
            "message": self.verdict.message,
            "prompt_tokens": self.prompt_tokens,
            "duration_s": round(self.duration_s, 3),
        }


_RANK = {Outcome.PASS: 0, Outcome.SKIPPED: 0, Outcome.WARN: 1, Outcome.FAIL: 2}


def breaks_at(results: Sequence[DepthResult]) -> int | None:
    """The shallowest depth that did not pass (skipped depths judge nothing)."""
    bad = [r.depth for r in results if r.verdict.result in (Outcome.WARN, Outcome.FAIL)]
    return min(bad) if bad else None


def _shown(result: DepthResult, percent: bool) -> str:
    figure = result.verdict.figure
    if result.verdict.result is Outcome.SKIPPED or figure is None:
        return f"{result.verdict.result.value} at {depth_label(result.depth)}"
    value = f"{figure:.0%}" if percent else f"{figure:g}"
    return f"{value} at {depth_label(result.depth)}"


def combine(
    what: str,
    results: Sequence[DepthResult],
    skipped: Sequence[tuple[int, str]] = (),
    percent: bool = True,
) -> Verdict:
    """One verdict over the depths: the worst result, the lowest figure, the curve.

    The message reads ``copy 100% at 16k, 98% at 64k, 15% at 96k: breaks at 96k``; the
    advice is the worst depth's. ``details.depths`` holds every depth (skipped ones with
    why) for the dashboard's curve and ``canary status``.
    """
    entries = [r.as_dict() for r in results]
    entries += [
        {"depth": depth, "result": "skipped", "figure": None, "message": why}
        for depth, why in skipped
    ]
    entries.sort(key=lambda entry: int(entry["depth"]))
    judged = [r for r in results if r.verdict.result is not Outcome.SKIPPED]
    where = breaks_at(results)
    details: dict[str, Any] = {"depths": entries, "breaks_at": where}
    if not judged:
        why = results[0].verdict.message if results else "no depth fits the engine's context"
        if not results and skipped:
            why = f"every depth skipped: {skipped[0][1]}"
        return Verdict(Outcome.SKIPPED, None, why, "runs at the next deep round", details)
    worst = max(judged, key=lambda r: (_RANK[r.verdict.result], -(r.verdict.figure or 0.0)))
    figures = [r.verdict.figure for r in judged if r.verdict.figure is not None]
    curve = ", ".join(_shown(r, percent) for r in sorted(results, key=lambda r: r.depth))
    message = f"{what} {curve}"
    if where is not None:
        first = next(r for r in results if r.depth == where)
        message += f": breaks at {depth_label(where)} ({first.verdict.message})"
    return Verdict(
        worst.verdict.result,
        min(figures) if figures else None,
        message,
        worst.verdict.advice,
        details,
    )
