"""Determinism: the same prompt twice at temperature 0 must give the same tokens.

Output that changes between identical greedy requests is a sign of a build failing
silently (a broken Engram host mode showed it, with decode speed unchanged). Where drift
is expected the canary says so instead of warning: the field notes measured DSpark
output as not reproducible at temperature 0 even run to run on one server ("run without
--speculative-config when you need determinism"), so with speculative decoding on a drift
is reported as ``not expected`` to be deterministic, naming that cause, and passes.
"""

from __future__ import annotations

from typing import Any

from serving.canary.model import Outcome, Verdict

NAME = "determinism"
UNIT = "ratio"
SEED = 1234
PROMPT = (
    "Continue this story in about sixty words, plainly: The harbor was quiet in the "
    "morning and the boats rested on the grey water while the market opened."
)
ADVICE_DRIFT = (
    "identical requests at temperature 0 gave different tokens with no speculative decoding "
    "to explain it: a build can fail silently this way (an Engram host mode did); compare "
    "with the last good build (fleetctl builds) and check the Engram storage settings"
)
ADVICE_EXPECTED = "run without --speculative-config when you need determinism"


def determinism_request() -> dict[str, Any]:
    """Chat-request fields (no model): greedy, seeded, a fixed length."""
    return {
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0,
        "top_p": 1,
        "seed": SEED,
        "max_tokens": 96,
    }


def first_difference(first: str, second: str) -> tuple[int, str, str] | None:
    """The first word that differs (its index and both words), or None when equal."""
    if first == second:
        return None
    a, b = first.split(), second.split()
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index, x, y
    shorter = min(len(a), len(b))
    return shorter, " ".join(a[shorter : shorter + 1]), " ".join(b[shorter : shorter + 1])


def judge_determinism(first: str, second: str, speculative: str | None) -> Verdict:
    """Pass when equal; with drift, pass as ``not expected`` under speculative decoding, else warn.

    ``speculative`` is the recipe's speculative-decoding method (``None``: off).
    """
    difference = first_difference(first, second)
    details: dict[str, Any] = {
        "identical": difference is None,
        "speculative": speculative,
        "expected": "deterministic" if speculative is None else "not expected",
    }
    if difference is None:
        also = f" (with {speculative} speculative decoding on)" if speculative else ""
        return Verdict(
            Outcome.PASS, 1.0, f"the same prompt twice gave the same tokens{also}", "", details
        )
    index, was, now = difference
    details.update({"first_difference_word": index, "first": was, "second": now})
    where = f"word {index + 1}: {was!r} then {now!r}"
    if speculative is not None:
        details["cause"] = f"speculative decoding ({speculative})"
        return Verdict(
            Outcome.PASS,
            0.0,
            f"not expected: output differs at temperature 0 ({where}), as it does with "
            f"speculative decoding ({speculative}) on",
            ADVICE_EXPECTED,
            details,
        )
    return Verdict(
        Outcome.WARN,
        0.0,
        f"output drifts at temperature 0 with no speculative decoding ({where})",
        ADVICE_DRIFT,
        details,
    )
