"""The last refused start is kept until the next start (``recovery.refusals``)."""

from __future__ import annotations

from recovery.decisions import Reason
from recovery.refusals import RefusalMemory

LATCH = Reason("reboot_latch", "reboot required: Xid 31 (MMU page fault) on card 1", "reboot")


def test_a_refusal_is_kept_with_its_codes_until_a_start() -> None:
    memory = RefusalMemory()
    assert memory.last is None
    memory.note("autostart", False, (LATCH, LATCH), "reboot required: Xid 31 ...")
    kept = memory.last
    assert kept is not None
    assert kept.as_dict()["codes"] == ["reboot_latch"]  # each code once
    assert kept.as_dict()["trigger"] == "autostart"
    memory.note("backoff_due", False, (), "no engine is configured")  # no reason: not a refusal
    assert memory.last is kept
    memory.note("start_request", True, (), "")
    assert memory.last is None
