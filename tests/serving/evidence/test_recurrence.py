"""Recurrence: the third same fault on one card in a week escalates, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from serving.evidence.recurrence import Occurrence, depth_band, escalation, groups

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def fault(n: int, day: float, card: int = 3, kind: str = "illegal_memory_access") -> Occurrence:
    return Occurrence(
        f"b{n}",
        T0 + timedelta(days=day),
        kind,
        card,
        f"SER{card}",
        card,
        None,
        "img@sha256:1",
        "speculative verify",
    )


def test_the_third_in_seven_days_advises_a_memtest_then_another_slot() -> None:
    first, second, third = fault(1, 0), fault(2, 1), fault(3, 2)
    assert escalation(first, []) is None
    assert escalation(second, [first]) is None
    found = escalation(third, [first, second])
    assert found is not None
    assert found.summary == (
        "third illegal memory access on card 3 (rank 3) in 7 days, all during speculative verify"
    )
    assert "stress memory test of card 3" in found.advice and "another slot" in found.advice
    assert found.bundle_ids == ("b1", "b2", "b3")


def test_a_fourth_does_not_notify_again_and_old_or_other_faults_do_not_count() -> None:
    faults = [fault(1, 0), fault(2, 1), fault(3, 2)]
    assert escalation(fault(4, 3), faults) is None  # said once, at the third
    assert escalation(fault(5, 20), [fault(1, 0), fault(2, 1)]) is None  # outside the week
    assert escalation(fault(6, 2, card=1), [fault(1, 0), fault(2, 1)]) is None  # another card
    other = fault(7, 2, kind="xid79")
    assert escalation(other, [fault(1, 0), fault(2, 1)]) is None


def test_groups_by_serial_rank_depth_band_and_build() -> None:
    deep = Occurrence("d1", T0, "xid31", 3, "SER3", 3, 140_000, "img@sha256:1")
    found = groups([deep])
    assert found["xid31/serial:SER3"] == ["d1"]
    assert found["xid31/rank:3"] == ["d1"]
    assert found["xid31/depth:128k-192k"] == ["d1"]
    assert found["xid31/build:img@sha256:1"] == ["d1"]
    assert depth_band(None) is None
