"""``fleetctl fleet status``: a drained rig says so in its detail (issue 42), after the latch.

The summary is a pure reading of each rig's status document (``daemon.cli.fleet.query``).
"""

from __future__ import annotations

from typing import Any

from daemon.cli.fleet.file import Rig
from daemon.cli.fleet.query import RigReading, RigSummary


def _summary(doc: dict[str, Any]) -> RigSummary:
    return RigSummary.of(RigReading(Rig("a", "http://a:8170", None), doc, None, 0.01))


def _doc(**extra: Any) -> dict[str, Any]:
    return {"overall": "ok", "cards": [], "checks": [], "serving": {}, "recovery": {}, **extra}


def test_a_drained_rig_says_why_in_its_detail() -> None:
    drained = _doc(drain={"draining": True, "reason": "new risers", "by": "cli"})
    assert _summary(drained).detail == "draining: new risers"
    by_whom = _doc(drain={"draining": True, "reason": None, "by": "api"})
    assert _summary(by_whom).detail == "draining: by api"
    assert _summary(_doc(drain={"draining": False})).detail == ""


def test_the_latch_comes_before_the_drain() -> None:
    both = _doc(
        recovery={"reboot_required": True, "reason": "Xid 79 on card 1"},
        drain={"draining": True, "reason": "the host reboots"},
    )
    assert _summary(both).detail == "reboot required: Xid 79 on card 1"
