"""Non-fatal engine log signatures: patterns counted per hour from the captured engine log.

These lines do not kill the engine, so nothing else reports them, yet a rising count is
the early sign of the failures the seeds describe: out-of-vocab tokens from a DSpark draft
or an unguarded argmax, repetition tripwires and nudges firing, grammar/FSM rejections,
tool calls salvaged from broken markup, raw tool-call markup a parser gave up on (the same
markers ``serving.detectors`` finds in replies), and Python tracebacks. Owners add their fork's own
lines with ``[[serving.log_signatures]]`` (``name``, ``pattern``, ``severity``) or the older
``[[canary.log_signatures]]`` (``name``, ``regex``); the same name replaces a built-in.
A signature's severity (``info`` for the built-ins) says whether a sighting is news.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from serving.canary.settings import LogSignature
from serving.detectors import MARKUP_PATTERN

BUILTIN_SIGNATURES: tuple[LogSignature, ...] = (
    LogSignature(
        name="out_of_vocab",
        regex=r"(?i)out[- _]of[- _]vocab|\bOOV\b|token id \d+ (?:is )?out of range",
    ),
    LogSignature(
        name="repetition_tripwire",
        regex=r"(?i)repetition tripwire|tripwire (?:fired|tripped)|\bnudge (?:fired|spliced|injected)",
    ),
    LogSignature(
        name="grammar_rejection",
        regex=r"(?i)grammar rejected tokens|failed to advance FSM|FSM rejection",
    ),
    LogSignature(
        name="tool_call_salvage",
        regex=r"(?i)tool[- _]call salvage|salvaged (?:a )?tool call|recovered (?:an )?orphan invoke",
    ),
    LogSignature(name="traceback", regex=r"^Traceback \(most recent call last\):"),
    # A parser that gave up logs the text it could not parse: the same raw tool-call markup
    # the tool-call canary and the traffic guard find in replies (``serving.detectors``).
    LogSignature(name="tool_call_markup", regex=MARKUP_PATTERN),
)


INFO = "info"


@dataclass(frozen=True, slots=True)
class SignatureTable:
    """Compiled patterns, in order; a line counts once per signature it matches."""

    names: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    severities: tuple[str, ...] = ()

    @classmethod
    def build(
        cls, extra: Sequence[LogSignature] = (), rules: Sequence[tuple[str, str, str]] = ()
    ) -> SignatureTable:
        """The built-ins with ``extra`` and ``rules`` added; a later name replaces an earlier.

        ``rules`` are ``(name, pattern, severity)`` (``[[serving.log_signatures]]``); the
        built-ins and ``extra`` are ``info``.
        """
        by_name = {sig.name: (sig.regex, INFO) for sig in BUILTIN_SIGNATURES}
        for sig in extra:
            by_name[sig.name] = (sig.regex, INFO)
        for name, pattern, severity in rules:
            by_name[name] = (pattern, severity)
        return cls(
            names=tuple(by_name),
            patterns=tuple(re.compile(pattern) for pattern, _ in by_name.values()),
            severities=tuple(severity for _, severity in by_name.values()),
        )

    def severity(self, name: str) -> str:
        """A signature's severity (``info`` when not known)."""
        if name in self.names and self.severities:
            return self.severities[self.names.index(name)]
        return INFO

    def match(self, line: str) -> list[str]:
        """The signatures ``line`` shows."""
        return [
            name
            for name, pattern in zip(self.names, self.patterns, strict=True)
            if pattern.search(line)
        ]

    def count(self, lines: Iterable[str]) -> Counter[str]:
        """How often each signature occurs in ``lines`` (absent ones are 0)."""
        counts: Counter[str] = Counter()
        for line in lines:
            counts.update(self.match(line))
        return counts


def hour_of(ts: datetime) -> datetime:
    """The start of ``ts``'s hour (the bucket a line is counted in)."""
    return ts.replace(minute=0, second=0, microsecond=0)
