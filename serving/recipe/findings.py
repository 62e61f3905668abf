"""One problem found in a launch recipe, shared by the recipe parser and the linter.

The parser reports unknown keys and wrong types as findings instead of raising, so
``fleetctl recipe lint`` can list every problem of a file at once; ``load_recipe`` turns
the first of them into a ``RecipeError`` for callers that just need a valid recipe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning"]

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
    """

    rule: str
    severity: Severity
    key: str
    value: str
    reason: str

    def line(self) -> str:
        """One human line: ``error [partition-sum] layer_partition = 12,12,12,8: ...``."""
        if not self.key:
            return f"{self.severity} [{self.rule}] {self.reason}"
        shown = f"{self.key} = {self.value}" if self.value else f"{self.key} (unset)"
        return f"{self.severity} [{self.rule}] {shown}: {self.reason}"

    def to_dict(self) -> dict[str, str]:
        """The JSON form used by ``fleetctl recipe lint --json``."""
        return asdict(self)


def exit_code(findings: Iterable[Finding]) -> int:
    """``recipe lint`` exit status: 0 clean, 1 warnings only, 2 any error."""
    severities = {finding.severity for finding in findings}
    if "error" in severities:
        return EXIT_ERRORS
    if "warning" in severities:
        return EXIT_WARNINGS
    return EXIT_CLEAN
