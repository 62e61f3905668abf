"""``fleetctl explain CHECK_ID``: every check fleetd or ``check`` can report has its text."""

from __future__ import annotations

from daemon.config import KNOWN_CHECK_IDS
from hwcheck.check_texts import CHECK_TEXTS
from hwcheck.explain import explanations, of_check
from tests.support.cli import run_fleetctl_here


def test_every_check_has_a_meaning_and_a_remedy() -> None:
    assert set(KNOWN_CHECK_IDS) <= set(CHECK_TEXTS)
    for check_id, text in CHECK_TEXTS.items():
        assert text.title and len(text.meaning) > 60 and text.remedy, check_id


def test_the_status_explains_the_failing_checks_once_after_the_xids() -> None:
    found = explanations([], None, ["power_brake", "power_brake", "xid_since_boot", "nosuch"])
    assert [item.fault for item in found] == ["power_brake"]
    assert found[0] == of_check("power_brake")


def test_explain_power_brake_needs_no_daemon_and_names_the_fix() -> None:
    shown = run_fleetctl_here("--url", "http://127.0.0.1:9", "explain", "power_brake")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert text.startswith("power_brake: HW power brake (PWRBRK#)")
    assert "what to do: first find where the assertion comes from" in text
    assert "Kapton tape over pin B30" in text
    unknown = run_fleetctl_here("explain", "power_brak")
    assert unknown.returncode == 2 and "power_brake" in unknown.stderr
