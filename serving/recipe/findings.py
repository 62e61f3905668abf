"""One problem found in a launch recipe, shared by the recipe parser and the linter.

The parser reports unknown keys and wrong types as findings instead of raising, so
``fleetctl recipe lint`` can list every problem of a file at once; ``load_recipe`` turns
the first of them into a ``RecipeError`` for callers that just need a valid recipe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

# A note never changes the exit code: a waived finding, or a check that could not run.
Severity = Literal["error", "warning", "note"]

EXIT_CLEAN = 0
EXIT_WARNINGS = 1
EXIT_ERRORS = 2


@dataclass(frozen=True)
class Finding:
    """One rule a recipe breaks.

    ``key`` is the recipe key the finding is about (``layer_partition``,
    ``speculative.num_speculative_tokens``, ``env.DSV4_LOGITS_ROW_CHUNK``) or, for a flag
    given in ``extra_args``, the flag itself (``--enforce-eager``). ``value`` is the
    offending value as text ("" when the key is unset) and ``reason`` says why it matters.
    ``waived`` is the recipe's ``[lint] waive`` reason when the owner waived the rule: the
    finding is then a ``note`` that keeps its reason and shows the owner's.
    """

    rule: str
    severity: Severity
    key: str
    value: str
    reason: str
    waived: str | None = None

    def line(self) -> str:
        """One human line: ``error [partition-sum] layer_partition = 12,12,12,8: ...``."""
        why = self.reason if self.waived is None else f"waived: {self.waived} ({self.reason})"
        if not self.key:
            return f"{self.severity} [{self.rule}] {why}"
        shown = f"{self.key} = {self.value}" if self.value else f"{self.key} (unset)"
        return f"{self.severity} [{self.rule}] {shown}: {why}"

    def to_dict(self) -> dict[str, str]:
        """The JSON form used by ``fleetctl recipe lint --json`` (``waived`` only when set)."""
        document = asdict(self)
        if self.waived is None:
            del document["waived"]
        return document


def exit_code(findings: Iterable[Finding]) -> int:
    """``recipe lint`` exit status: 0 clean, 1 warnings only, 2 any error."""
    severities = {finding.severity for finding in findings}
    if "error" in severities:
        return EXIT_ERRORS
    if "warning" in severities:
        return EXIT_WARNINGS
    return EXIT_CLEAN
