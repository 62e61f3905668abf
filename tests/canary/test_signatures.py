"""Log-signature counting from a recorded engine log excerpt with known counts."""

from __future__ import annotations

from pathlib import Path

from serving.canary.settings import LogSignature
from serving.canary.signatures import SignatureTable

EXCERPT = Path(__file__).parent / "data" / "engine-signatures.log"


def test_the_builtin_table_counts_the_recorded_excerpt() -> None:
    counts = SignatureTable.build().count(EXCERPT.read_text().splitlines())
    assert dict(counts) == {
        "out_of_vocab": 2,
        "repetition_tripwire": 3,  # two tripwires and one nudge
        "grammar_rejection": 2,
        "tool_call_salvage": 2,
        "traceback": 1,
    }


def test_an_owner_pattern_adds_a_signature_and_a_same_name_one_replaces() -> None:
    table = SignatureTable.build(
        [
            LogSignature(name="generation_report", regex=r"Avg generation throughput"),
            LogSignature(name="traceback", regex=r"^ValueError:"),
        ]
    )
    counts = table.count(EXCERPT.read_text().splitlines())
    assert counts["generation_report"] == 1
    assert counts["traceback"] == 1  # the replacement's pattern, not the built-in's
    assert table.names[-1] == "generation_report"


def test_serving_signatures_add_with_their_severity() -> None:
    """``[[serving.log_signatures]]`` extend the built-ins; a same name replaces."""
    table = SignatureTable.build(
        [LogSignature(name="engram_miss", regex=r"Engram")],
        [
            ("generation_report", r"Avg generation throughput", "warning"),
            ("engram_miss", "x", "critical"),
        ],
    )
    counts = table.count(EXCERPT.read_text().splitlines())
    assert counts["generation_report"] == 1
    assert table.severity("generation_report") == "warning"
    assert table.severity("engram_miss") == "critical"
    assert table.severity("traceback") == "info"
    builtins = SignatureTable.build().names
    assert table.names[: len(builtins)] == builtins
