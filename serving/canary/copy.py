"""Copy fidelity: ask for random identifiers back verbatim and score exact lines.

On these rigs the worst failures are silent: one sm_80 port mangled 85% of named paths at
75k-92k tokens, another build copied 15 of 20 identifiers, and prose looked fine in both.
The identifiers are the kinds that break (snake_case with digits, image paths, hex ids);
the prompt carries no other code-like word, so an echo cannot be confused with the
instructions. A long filler context (optional) repeats the test where corruption lives.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from serving.canary.model import Outcome, Verdict

NAME = "copy_fidelity"
UNIT = "ratio"
FAIL_BELOW = 0.90
ADVICE_FAIL = (
    "token corruption in the engine build, not the prompt: check the attention kernels of "
    "the port, the NaN-logit guard before argmax (vLLM #50183), and Engram storage mode"
)
ADVICE_WARN = (
    "the engine changed copied identifiers: watch this canary; a long-context repeat "
    "(canary.filler_tokens) shows whether corruption grows with context"
)
INSTRUCTION = (
    "Copy every entry listed between the two marker lines back exactly as written, "
    "one entry per line, in the same order, with no other text."
)
_WORDS = (
    "alpha", "bravo", "cache", "delta", "ember", "frame", "glyph", "harbor", "index",
    "juniper", "kernel", "lumen", "matrix", "nickel", "orbit", "pixel", "quartz", "ridge",
    "shard", "token", "umber", "vector", "willow", "xenon", "yield", "zephyr",
)  # fmt: skip
_FILLER = (
    "the harbor was quiet in the morning and the boats rested on the grey water while "
    "gulls circled above the market where traders set out bread and fish and rope "
)


def _snake(rng: random.Random) -> str:
    words = rng.sample(_WORDS, rng.randint(2, 3))
    return "_".join(words) + f"_{rng.randint(0, 999):03d}"


def _path(rng: random.Random) -> str:
    folder = rng.choice(("w", "data", "assets", "out"))
    stem = rng.choice(("img", "frame", "shot", "tile"))
    ext = rng.choice(("png", "jpg", "webp"))
    return f"/{folder}/{stem}_{rng.randint(0, 9999):04d}.{ext}"


def _hex(rng: random.Random) -> str:
    while True:  # at least one digit: an all-letter id reads as a word, not an id
        text = "".join(rng.choice(string.hexdigits[:16]) for _ in range(rng.choice((8, 12, 16))))
        if any(ch.isdecimal() for ch in text):
            return text


def make_identifiers(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct identifiers, the three kinds in turn (snake, path, hex)."""
    makers = (_snake, _path, _hex)
    found: list[str] = []
    while len(found) < count:
        candidate = makers[len(found) % len(makers)](rng)
        if candidate not in found:
            found.append(candidate)
    return found


def filler_text(words: int) -> str:
    """About ``words`` words of plain prose (no digits, no code-like words)."""
    base = _FILLER.split()
    return " ".join(base[i % len(base)] for i in range(max(words, 0)))


PASSAGE_HEAD = "Read this passage, then do the task after it."


def copy_prompt(identifiers: list[str], filler_words: int = 0, passage: str | None = None) -> str:
    """The user message: optional filler first (so the list sits deep in context), then the list.

    ``passage`` is the filler itself when the caller made it (the deep round's, seeded).
    """
    parts = []
    if passage is not None:
        parts.append(f"{PASSAGE_HEAD}\n{passage}")
    elif filler_words > 0:
        parts.append(f"{PASSAGE_HEAD}\n" + filler_text(filler_words))
    parts.append(INSTRUCTION)
    parts.append("BEGIN LIST\n" + "\n".join(identifiers) + "\nEND LIST")
    return "\n\n".join(parts)


@dataclass(frozen=True, slots=True)
class CopyScore:
    """How many identifiers came back exactly, and the first few that did not."""

    exact: int
    total: int
    misses: tuple[str, ...]

    @property
    def ratio(self) -> float:
        """Exact copies over identifiers asked for (0 when none were asked)."""
        return self.exact / self.total if self.total else 0.0


def score_copy(expected: list[str], reply: str) -> CopyScore:
    """Exact-line scoring: an identifier counts when a reply line is exactly it.

    Surrounding whitespace and list bullets a model adds are forgiven; a changed character,
    a dropped underscore or a merged line is not.
    """
    lines = {line.strip().lstrip("-*• ").strip("`").strip() for line in reply.splitlines()}
    misses = tuple(ident for ident in expected if ident not in lines)
    return CopyScore(exact=len(expected) - len(misses), total=len(expected), misses=misses)


def judge_copy(score: CopyScore, context: str = "") -> Verdict:
    """Any miss is a warning; under 90% exact is a failure with the token-corruption advice."""
    where = f" {context}" if context else ""
    shown = ", ".join(score.misses[:3]) + ("..." if len(score.misses) > 3 else "")
    details = {"exact": score.exact, "total": score.total, "misses": list(score.misses[:10])}
    message = f"{score.exact}/{score.total} identifiers copied exactly{where}"
    if score.total == 0:
        return Verdict(Outcome.WARN, None, "no identifiers were asked for", "", details)
    if score.ratio < FAIL_BELOW:
        return Verdict(
            Outcome.FAIL, score.ratio, f"{message}; wrong: {shown}", ADVICE_FAIL, details
        )
    if score.misses:
        return Verdict(
            Outcome.WARN, score.ratio, f"{message}; wrong: {shown}", ADVICE_WARN, details
        )
    return Verdict(Outcome.PASS, score.ratio, message, "", details)


def worse(first: Verdict, second: Verdict) -> Verdict:
    """The worse of two copy verdicts (short and long context): fail > warn > pass."""
    rank = {Outcome.PASS: 0, Outcome.SKIPPED: 0, Outcome.WARN: 1, Outcome.FAIL: 2}
    if rank[second.result] > rank[first.result]:
        return second
    if rank[second.result] == rank[first.result] and (second.figure or 0) < (first.figure or 0):
        return second
    return first
