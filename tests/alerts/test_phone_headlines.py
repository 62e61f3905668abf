"""What a phone shows: the step first in the latch's summary, no raw ISO times, one headline.

After the escalation the summary was cut at 200 characters mid-sentence, before it said
what to do, and carried ``2026-12-06T04:42:00+00:00`` twice; Discord showed the same
headline as its message and again as its embed's title.
"""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.alerts.formats import Notification, RenderContext, render_discord
from daemon.alerts.rules import latch_signal
from daemon.store import Latch
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.model import Advice
from recovery.facts import Facts, PastFault, Trigger, XidFact
from recovery.policy import decide, short_time

NOW = datetime(2026, 12, 6, 4, 50, tzinfo=UTC)


def test_the_escalations_reason_has_short_times_and_its_summary_starts_with_the_step() -> None:
    past = (PastFault(1, 1, "Xid 31 (MMU page fault)", NOW.isoformat(), NOW.isoformat()),)
    facts = Facts(
        Trigger.XID, new_xids=(XidFact(XidCatalogue().info(31), card=1),), past_faults=past
    )
    decision = decide(facts, 0.0)
    assert "T04:50" not in decision.reason and "+00:00" not in decision.reason
    assert "at 2026-12-06 04:50 UTC" in decision.reason
    latch = Latch(decision.reason, "recovery", NOW, decision.advice, 1)
    summary = latch_signal(latch).summary
    assert summary.startswith("Cold power cycle required (a warm reboot did not help): ")
    assert len(summary) <= 200
    out = Latch("...", "recovery", NOW, Advice.TAKE_CARD_OUT, 1)
    assert latch_signal(out).summary.startswith("Take the card out (no reboot helped): ")
    assert short_time("t0") == "t0"  # not a time: shown as it is


def test_discord_shows_the_headline_once() -> None:
    payload = {
        "alert_id": 3,
        "status": "firing",
        "severity": "critical",
        "summary": "Cold power cycle required (a warm reboot did not help): card 1 ...",
        "advice": "Power the rig off for about 30 s, then on.",
        "labels": {"alertname": "RebootRequired"},
        "rule": "reboot_required",
        "count": 1,
        "repeat": False,
        "started_at": NOW.isoformat(),
        "resolved_at": None,
    }
    body = render_discord(Notification("uid", payload, NOW), RenderContext("phone", "rig-a"))
    assert body["content"] == "CRITICAL on rig-a: RebootRequired"
    assert payload["summary"] in body["embeds"][0]["title"]
    assert payload["summary"] not in body["content"]
