"""A verdict an alert set is named in ``fleetctl status``, not "checks: all ok" alone."""

from __future__ import annotations

from daemon.cli.rig.status import status_lines
from daemon.cli.views import rigview
from daemon.cli.views.rigview import Screen
from daemon.cli.views.screen import plain
from hwcheck import verdict


def test_the_alert_behind_a_warning_is_named_under_the_verdict() -> None:
    doc = {
        "overall": "warning",
        "checks": [{"id": "power_cap", "card": 0, "severity": "ok", "message": "ok"}],
        "causes": [],
        "cards": [],
        "rig": {"why": "alert SpecAcceptanceCollapsed: Speculative decoding acceptance collapsed"},
        "recovery": {"reboot_required": False},
    }
    lines = plain(status_lines(doc, Screen(100))).splitlines()
    assert lines[0] == "overall: WARNING"
    assert lines[1] == ("alert: SpecAcceptanceCollapsed: Speculative decoding acceptance collapsed")
    doc["rig"] = {"why": "every check passes"}
    doc["overall"] = "ok"
    assert not any(
        line.startswith("alert:") for line in plain(status_lines(doc, Screen(100))).splitlines()
    )


def test_the_view_reads_the_verdicts_own_words() -> None:
    assert rigview.ALERT_WHY == verdict.ALERT_WHY
