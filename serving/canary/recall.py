"""Recall: facts stated at several depths of a long context, asked back at its end.

The field notes measured recall falling with context length on DeepSeek V4 (100% at
150k, 60% at 450k, 30% at 900k: the indexer keeps a fixed top-k while the candidates
grow) and builds whose recall drops far sooner. Each fact is one sentence, ``The code for
locker 17 is K7-4821.``, planted at evenly spaced points of the filler (the first near the
top, the last near the question); the reply must give every code back, one per line as
``label: code``. The figure is the share recalled exactly.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from typing import Any

from serving.canary.copy import PASSAGE_HEAD
from serving.canary.depth import filler, filler_words_for
from serving.canary.model import Outcome, Verdict

NAME = "recall"
UNIT = "ratio"
FAIL_BELOW = 0.6
ASK = "Give the code for each of these, one per line as LABEL: CODE, with no other text:"
ADVICE_FAIL = (
    "the engine loses facts stated earlier in a long context: keep retrieval-critical "
    "context shorter than the depth where recall breaks (or re-inject it), and compare "
    "with the last good build (fleetctl builds); thinking on raises recall"
)
ADVICE_WARN = (
    "the engine missed a fact stated earlier in the context: watch the curve "
    "(fleetctl canary status) before serving agents at this depth"
)
_LABELS = ("locker", "gate", "vault", "cabinet", "drawer", "door", "crate", "shelf")
_LINE_RE = re.compile(r"^\s*[-*•]?\s*([a-z]+ [0-9]+)\s*[:=-]\s*`?([A-Za-z0-9-]+)`?\s*\.?\s*$")


@dataclass(frozen=True, slots=True)
class Fact:
    """One planted fact: a label and its code."""

    label: str
    code: str

    @property
    def sentence(self) -> str:
        """The sentence planted in the filler."""
        return f"The code for {self.label} is {self.code}."


def make_facts(rng: random.Random, count: int) -> list[Fact]:
    """``count`` facts with distinct labels and codes (letters and digits, like ``K7-4821``)."""
    facts: list[Fact] = []
    labels: set[str] = set()
    while len(facts) < count:
        label = f"{rng.choice(_LABELS)} {rng.randint(1, 99)}"
        if label in labels:
            continue
        labels.add(label)
        code = f"{rng.choice(string.ascii_uppercase)}{rng.randint(1, 9)}-{rng.randint(1000, 9999)}"
        facts.append(Fact(label, code))
    return facts


def recall_request(facts: list[Fact], depth_tokens: int, seed: int) -> dict[str, Any]:
    """Chat-request fields (no model): the filler with the facts planted, then the question."""
    words = filler(filler_words_for(depth_tokens), seed).split(" ")
    count = max(len(facts), 1)
    # Evenly spaced, the first near the top: (i + 0.5) / count of the way through.
    cuts = [round(len(words) * (i + 0.5) / count) for i in range(len(facts))]
    parts: list[str] = []
    start = 0
    for fact, cut in zip(facts, cuts, strict=True):
        parts.append(" ".join(words[start:cut]))
        parts.append(fact.sentence)
        start = cut
    parts.append(" ".join(words[start:]))
    passage = " ".join(part for part in parts if part)
    labels = ", ".join(fact.label for fact in facts)
    content = f"{PASSAGE_HEAD}\n{passage}\n\n{ASK} {labels}"
    return {
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 16 * len(facts) + 32,
    }


@dataclass(frozen=True, slots=True)
class RecallScore:
    """How many codes came back right, and which labels did not."""

    found: int
    total: int
    misses: tuple[str, ...]

    @property
    def ratio(self) -> float:
        """Codes recalled over codes planted (0 when none were)."""
        return self.found / self.total if self.total else 0.0


def score_recall(facts: list[Fact], reply: str) -> RecallScore:
    """A fact counts when a reply line gives its label with exactly its code."""
    given: dict[str, str] = {}
    for line in reply.splitlines():
        match = _LINE_RE.match(line)
        if match:
            given.setdefault(match.group(1), match.group(2))
    misses = tuple(fact.label for fact in facts if given.get(fact.label) != fact.code)
    return RecallScore(len(facts) - len(misses), len(facts), misses)


def judge_recall(score: RecallScore) -> Verdict:
    """All recalled: pass; any miss warns; under 60% fails."""
    details = {"found": score.found, "total": score.total, "misses": list(score.misses)}
    message = f"{score.found}/{score.total} facts recalled"
    if score.total == 0:
        return Verdict(Outcome.WARN, None, "no facts were planted", "", details)
    if score.ratio < FAIL_BELOW:
        return Verdict(Outcome.FAIL, score.ratio, message, ADVICE_FAIL, details)
    if score.misses:
        return Verdict(Outcome.WARN, score.ratio, message, ADVICE_WARN, details)
    return Verdict(Outcome.PASS, score.ratio, message, "", details)
