"""Long-context defects of the simulated engine: what real builds do deep in a context.

The field notes report failures that live only deep in the context, each reproduced here
as a ``--sim-*`` flag (and an ``[engine]`` scenario key) so the deep canaries are tested
against the same shapes:

- copies corrupted only inside a band of context lengths (one sm_80 port mangled 85% of
  paths at 75k-92k tokens and none at short lengths): ``--sim-corrupt-band FROM:TO`` with
  ``--sim-corrupt-band-pct``;
- "Let me check..." loops with no tool call past a context length (about 100k tokens):
  ``--sim-loop-after-tokens``;
- recall of facts stated earlier falling with context length (100% short, about 30% very
  deep), the facts stated deepest lost first: ``--sim-recall-full-until-tokens``,
  ``--sim-recall-floor`` and ``--sim-recall-floor-at-tokens``;
- output that changes between identical requests at temperature 0 (a silent Engram
  failure; DSpark on some builds): ``--sim-drift``.

Context length is estimated as characters / 4 (about 1.3 tokens per English word, as the
canaries size their filler), so a 96k-token prompt costs the simulation a ``len()``, not
a tokenizer. Deep prompts also cost no real time: only prompts up to
``--sim-prefill-pace-max-tokens`` (default 8,192: the throughput canary's) wait for their
prefill; 0 paces every prompt, as the cost bench does with a 4-card rig's 5,300 tok/s.
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
DEFAULT_PACE_MAX_TOKENS = 8192
LOOP_LINE = "Let me check the run progress."
LOOP_REPEATS = 6
_FACT_RE = re.compile(r"The code for ([a-z]+ [0-9]+) is ([A-Za-z0-9-]+)\.")
_RECALL_ASK = "Give the code for"


@dataclass(frozen=True, slots=True)
class LongContextDefects:
    """Which long-context defects the simulated build has (all off by default)."""

    corrupt_band: tuple[int, int] | None = None  # context tokens [from, to)
    corrupt_band_pct: float = 85.0
    loop_after_tokens: int | None = None
    recall_full_until_tokens: int | None = None
    recall_floor: float = 0.3
    recall_floor_at_tokens: int | None = None
    drift: bool = False
    prefill_pace_max_tokens: int = DEFAULT_PACE_MAX_TOKENS

    def copy_pct(self, context_tokens: int, base_pct: float) -> float:
        """Share of copied identifiers mangled at this context length."""
        band = self.corrupt_band
        if band is not None and band[0] <= context_tokens < band[1]:
            return max(base_pct, self.corrupt_band_pct)
        return base_pct

    def loops(self, context_tokens: int) -> bool:
        """True past the loop threshold: announcements instead of tool calls."""
        return self.loop_after_tokens is not None and context_tokens >= self.loop_after_tokens

    def recall_ratio(self, context_tokens: int) -> float:
        """Share of stated facts recalled: 1 until the threshold, down to the floor."""
        full = self.recall_full_until_tokens
        if full is None or context_tokens <= full:
            return 1.0
        floor_at = self.recall_floor_at_tokens or full * 4
        if context_tokens >= floor_at or floor_at <= full:
            return self.recall_floor
        progress = (context_tokens - full) / (floor_at - full)
        return 1.0 - (1.0 - self.recall_floor) * progress

    def paced_prefill_tokens(self, prompt_tokens: int) -> int:
        """How many prompt tokens prefill pacing charges: none beyond the limit (0: no limit)."""
        limit = self.prefill_pace_max_tokens
        return prompt_tokens if limit <= 0 or prompt_tokens <= limit else 0


def _band(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    try:
        low, high = int(start), int(end)
    except ValueError:
        low = high = -1
    if not sep or low < 0 or high <= low:
        raise argparse.ArgumentTypeError(f"expected FROM:TO tokens with FROM < TO, got {text!r}")
    return low, high


def _tokens(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def add_defect_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--sim-*`` flags of the long-context defects."""
    parser.add_argument("--sim-corrupt-band", type=_band, default=None)
    parser.add_argument("--sim-corrupt-band-pct", type=float, default=85.0)
    parser.add_argument("--sim-loop-after-tokens", type=_tokens, default=None)
    parser.add_argument("--sim-recall-full-until-tokens", type=_tokens, default=None)
    parser.add_argument("--sim-recall-floor", type=_share, default=0.3)
    parser.add_argument("--sim-recall-floor-at-tokens", type=_tokens, default=None)
    parser.add_argument("--sim-drift", action="store_true")
    parser.add_argument(
        "--sim-prefill-pace-max-tokens", type=_tokens, default=DEFAULT_PACE_MAX_TOKENS
    )


def defects_from_args(args: argparse.Namespace) -> LongContextDefects:
    """The defects the parsed flags ask for."""
    return LongContextDefects(
        corrupt_band=args.sim_corrupt_band,
        corrupt_band_pct=max(0.0, min(float(args.sim_corrupt_band_pct), 100.0)),
        loop_after_tokens=args.sim_loop_after_tokens,
        recall_full_until_tokens=args.sim_recall_full_until_tokens,
        recall_floor=args.sim_recall_floor,
        recall_floor_at_tokens=args.sim_recall_floor_at_tokens,
        drift=bool(args.sim_drift),
        prefill_pace_max_tokens=args.sim_prefill_pace_max_tokens,
    )


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as characters / 4 (rounded up): cheap at any length."""
    return -(-len(text) // CHARS_PER_TOKEN)


def context_tokens(messages: list[Any], text_of: Any) -> int:
    """The whole conversation's estimated tokens (every message's text)."""
    return sum(estimate_tokens(text_of(m)) for m in messages if isinstance(m, dict))


def recall_reply(prompt: str, ratio: float, rng: random.Random) -> str | None:
    """The answer to a recall question: each stated code, the deepest lost first.

    ``None`` when ``prompt`` asks no recall question. A lost code comes back wrong (a
    similar-looking value), as a model that lost it guesses.
    """
    ask = prompt.rfind(_RECALL_ASK)
    if ask == -1:
        return None
    facts = [(m.group(1), m.group(2)) for m in _FACT_RE.finditer(prompt, 0, ask)]
    if not facts:
        return None
    kept = round(len(facts) * ratio)
    lost = len(facts) - kept  # the facts stated first (deepest in the context) go first
    lines = []
    for index, (label, value) in enumerate(facts):
        said = value
        if index < lost:
            said = value[::-1] if rng.random() < 0.5 else value[:-1] + "0"
        lines.append(f"{label}: {said}")
    return "\n".join(lines)


def loop_text() -> str:
    """What a looping build says instead of making the call."""
    return "\n".join([LOOP_LINE] * LOOP_REPEATS)


_DRIFT_WORDS = ("quietly", "slowly", "steadily", "calmly", "simply")


def drifted(text: str, serial: int) -> str:
    """``text`` with one word changed by the request's ``serial``: two requests differ."""
    words = text.split(" ")
    if len(words) < 3:
        return f"{text} {_DRIFT_WORDS[serial % len(_DRIFT_WORDS)]}"
    index = 1 + serial % (len(words) - 2)
    words[index] = _DRIFT_WORDS[serial % len(_DRIFT_WORDS)]
    return " ".join(words)
