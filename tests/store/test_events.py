"""Events: round trip, ordering, filters, acknowledgement, Xid dedupe, check transitions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text

from daemon.store import Store, StoreError, StoreInputError, XidRecord
from hwcheck.checks.xid_since_boot import xid_severity
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import (
    Advice,
    CheckResult,
    ClassifiedXid,
    EventKind,
    Severity,
    XidAction,
    XidClass,
    XidEvent,
    XidInfo,
)
from tests.support.store_rows import at, card, poll


def test_events_round_trip_newest_first(store: Store) -> None:
    first = store.record_event("daemon", "info", "fleetd started", ts=at(0))
    late = store.record_event(
        "recovery",
        "critical",
        "engine stopped: Xid 79",
        card=2,
        xid=79,
        details={"decision": "stop", "why": ["xid 79", "hardware"]},
        ts=at(20),
    )
    middle_a = store.record_event("serving", "warning", "engine unhealthy", ts=at(10))
    middle_b = store.record_event("serving", "ok", "engine ready", ts=at(10))

    rows = store.list_events(limit=10)

    assert [row.id for row in rows] == [late, middle_b, middle_a, first]
    top = rows[0]
    assert (top.kind, top.severity, top.card, top.xid) == ("recovery", "critical", 2, 79)
    assert top.message == "engine stopped: Xid 79"
    assert top.details == {"decision": "stop", "why": ["xid 79", "hardware"]}
    assert top.ts == at(20)
    assert top.ts.tzinfo is not None
    assert top.ts.utcoffset() == timedelta(0)
    assert (top.kind, top.severity) == (EventKind.RECOVERY, Severity.CRITICAL)
    assert not top.acked
    document = top.to_dict()
    assert document["ts"] == "2025-03-01T12:00:20+00:00"
    assert {"id", "ts", "kind", "card", "xid", "severity", "message"} <= document.keys()
    assert json.loads(json.dumps(document))["kind"] == "recovery"
    assert store.get_event(middle_b) == rows[1]
    assert rows[1].severity is Severity.OK


def test_list_events_filters(store: Store) -> None:
    store.record_event("check", "warning", "power_cap off", card=1, ts=at(0))
    store.record_event("check", "ok", "power_cap back", card=1, ts=at(5))
    store.record_event("check", "critical", "vram locked", card=2, ts=at(6))
    store.record_event("daemon", "info", "started", ts=at(7))

    assert [r.message for r in store.list_events(kind="check", card=1)] == [
        "power_cap back",
        "power_cap off",
    ]
    assert [r.message for r in store.list_events(since=at(6))] == ["started", "vram locked"]
    assert [r.message for r in store.list_events(limit=1)] == ["started"]
    other_zone = at(6).astimezone(ZoneInfo("Europe/Berlin"))
    assert len(store.list_events(since=other_zone)) == 2
    worse = store.list_events(min_severity=Severity.WARNING)  # this severity or worse
    assert [r.message for r in worse] == ["vram locked", "power_cap off"]
    assert [r.message for r in store.list_events(min_severity=Severity.CRITICAL)] == ["vram locked"]
    assert len(store.list_events(min_severity=Severity.INFO)) == 4  # info lists them all
    assert [r.message for r in store.list_events(card=1, min_severity=Severity.WARNING)] == [
        "power_cap off"
    ]


def test_list_events_pages_by_cursor_and_time_window(store: Store) -> None:
    for second in range(6):
        store.record_event("daemon", "info", f"e{second}", ts=at(second))
    store.record_event("daemon", "info", "e5-twin", ts=at(5))  # same time: the id orders
    first = store.list_events(limit=3)
    assert [r.message for r in first] == ["e5-twin", "e5", "e4"]
    second = store.list_events(limit=3, before_id=first[-1].id)
    assert [r.message for r in second] == ["e3", "e2", "e1"]
    store.record_event("daemon", "info", "newer", ts=at(9))  # arrives while paging
    assert [r.message for r in store.list_events(before_id=second[-1].id)] == ["e0"]
    assert [r.message for r in store.list_events(since=at(1), until=at(3))] == ["e3", "e2", "e1"]
    assert store.list_events(before_id=10_000) == []
    assert store.ack_event(second[0].id, "test")
    assert [r.message for r in store.list_events(acked=True)] == ["e3"]
    assert "e3" not in [r.message for r in store.list_events(acked=False)]


def test_bad_event_input_is_a_one_line_error(store: Store) -> None:
    with pytest.raises(StoreInputError, match=r"unknown event kind 'bogus': expected xid\|check"):
        store.record_event("bogus", "info", "x")
    with pytest.raises(StoreInputError, match="unknown event severity 'fatal'"):
        store.record_event("daemon", "fatal", "x")
    with pytest.raises(StoreInputError, match="unknown event kind 'nope'"):
        store.list_events(kind="nope")
    with pytest.raises(StoreInputError, match="limit 0 out of range"):
        store.list_events(limit=0)
    with pytest.raises(StoreInputError, match="has no timezone"):
        store.record_event("daemon", "info", "x", ts=datetime(2025, 1, 1))  # noqa: DTZ001
    assert store.list_events() == []


def test_ack_keeps_the_first_acknowledgement(store: Store) -> None:
    event_id = store.record_event("xid", "critical", "Xid 79", card=0, xid=79)

    assert store.ack_event(event_id, "alice") is True
    assert store.ack_event(event_id, "bob") is True
    assert store.ack_event(event_id + 1000, "alice") is False

    row = store.get_event(event_id)
    assert row is not None
    assert row.acked
    assert row.acked_by == "alice"
    assert row.acked_at is not None
    assert abs(row.acked_at - datetime.now(UTC)) < timedelta(minutes=1)


def _xid(seq: int | None, boot: str | None = "boot-a", xid: int = 31) -> XidRecord:
    return XidRecord(
        ts=at(seq or 0),
        xid=xid,
        message=f"Xid {xid} seq {seq}",
        pci_bus_id="0000:02:00.0",
        boot_id=boot,
        kmsg_seq=seq,
    )


def test_same_kernel_record_is_stored_once(store: Store) -> None:
    assert store.add_xid_event(_xid(100)) is True
    assert store.add_xid_event(_xid(100)) is False
    assert store.add_xid_event(_xid(100, boot="boot-b")) is True
    assert store.add_xid_event(_xid(101)) is True
    # Without a sequence number nothing identifies the record: each one counts.
    assert store.add_xid_event(_xid(None, boot=None)) is True
    assert store.add_xid_event(_xid(None, boot=None)) is True

    rows = store.list_events(kind="xid")
    assert sorted((r.boot_id, r.kmsg_seq) for r in rows if r.kmsg_seq is not None) == [
        ("boot-a", 100),
        ("boot-a", 101),
        ("boot-b", 100),
    ]
    assert len(rows) == 5


def test_xid_and_cursor_move_together(store: Store) -> None:
    assert store.get_cursor() is None

    assert store.record_xid_and_cursor(_xid(7), KernelLogCursor("boot-a", 7)) is True
    assert store.get_cursor() == KernelLogCursor("boot-a", 7)

    # A replay after a restart: deduplicated, and the cursor never moves back.
    assert store.record_xid_and_cursor(_xid(5), KernelLogCursor("boot-a", 5)) is True
    assert store.record_xid_and_cursor(_xid(7), KernelLogCursor("boot-a", 7)) is False
    assert store.get_cursor() == KernelLogCursor("boot-a", 7)

    # A new boot starts over.
    assert store.record_xid_and_cursor(_xid(1, boot="boot-b"), KernelLogCursor("boot-b", 1))
    assert store.get_cursor() == KernelLogCursor("boot-b", 1)
    assert len(store.list_events(kind="xid")) == 3


def _refuse_kv_writes(store: Store) -> None:
    """A real database-side fault: any write to ``kv`` fails (fault injection in the DB)."""
    with store.write() as session:
        if store.dialect == "sqlite":
            for op in ("INSERT", "UPDATE"):
                session.execute(
                    text(
                        f"CREATE TRIGGER refuse_kv_{op.lower()} BEFORE {op} ON kv "
                        "BEGIN SELECT RAISE(ABORT, 'kv write refused by test'); END"
                    )
                )
        else:
            session.execute(
                text(
                    "CREATE FUNCTION refuse_kv() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'kv write refused by test'; END $$"
                )
            )
            session.execute(
                text(
                    "CREATE TRIGGER refuse_kv BEFORE INSERT OR UPDATE ON kv "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_kv()"
                )
            )


def _allow_kv_writes(store: Store) -> None:
    with store.write() as session:
        if store.dialect == "sqlite":
            session.execute(text("DROP TRIGGER refuse_kv_insert"))
            session.execute(text("DROP TRIGGER refuse_kv_update"))
        else:
            session.execute(text("DROP TRIGGER refuse_kv ON kv"))


def test_a_failed_cursor_write_takes_the_xid_with_it(store: Store) -> None:
    store.set_cursor(KernelLogCursor("boot-a", 10))
    _refuse_kv_writes(store)

    with pytest.raises(StoreError, match="kv write refused by test") as caught:
        store.record_xid_and_cursor(_xid(11), KernelLogCursor("boot-a", 11))
    assert "\n" not in str(caught.value)

    assert store.list_events(kind="xid") == []
    assert store.get_cursor() == KernelLogCursor("boot-a", 10)

    _allow_kv_writes(store)
    assert store.record_xid_and_cursor(_xid(11), KernelLogCursor("boot-a", 11)) is True
    assert store.get_cursor() == KernelLogCursor("boot-a", 11)


def test_classified_xid_gets_its_card_and_is_classified_again_later(store: Store) -> None:
    store.record_samples(poll(at(0), card(0), card(1, serial="1324021000123")))
    catalogue = XidCatalogue()
    event = XidEvent(
        xid=79,
        text="NVRM: Xid (PCI:0000:02:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
        message="GPU has fallen off the bus.",
        pci_bus_id="0000:02:00.0",
        pid=1234,
        process="python3",
        seq=42,
        boot_id="boot-a",
    )
    item = ClassifiedXid(event=event, info=catalogue.classify(event))
    cursor = KernelLogCursor("boot-a", 42)

    first = store.record_xid_and_cursor(
        item, card=1, severity="critical", message="Xid 79 on card 1", cursor=cursor
    )
    again = store.record_xid_and_cursor(item, cursor, message="Xid 79 on card 1")

    assert (first, again) == (True, False)
    (row,) = store.list_events(kind="xid")
    assert (row.card, row.xid, row.severity, row.message) == (1, 79, "critical", "Xid 79 on card 1")
    assert (row.card_uuid, row.card_serial) == ("GPU-test-1", "1324021000123")
    assert (row.boot_id, row.kmsg_seq) == ("boot-a", 42)

    rebuilt = store.xids_for_boot("boot-a", catalogue)
    assert rebuilt == [item]
    assert store.xids_for_boot("boot-b", catalogue) == []


@pytest.mark.parametrize(
    ("xid_class", "action", "expected"),
    [
        # a config override can make an application Xid advise a reboot: the card is suspect
        (XidClass.APPLICATION, XidAction.REBOOT, Severity.CRITICAL),
        # and a driver-class Xid that only asks for a look is a warning, as the check says
        (XidClass.DRIVER, XidAction.INSPECT, Severity.WARNING),
        (XidClass.HARDWARE, XidAction.INSPECT, Severity.CRITICAL),
        (XidClass.UNKNOWN, XidAction.INSPECT, Severity.WARNING),
    ],
)
def test_a_stored_xid_without_a_severity_is_as_bad_as_the_xid_check_says(
    store: Store, xid_class: XidClass, action: XidAction, expected: Severity
) -> None:
    event = XidEvent(xid=43, text="NVRM: Xid (PCI:0000:02:00): 43", message="m", seq=7)
    item = ClassifiedXid(event=event, info=XidInfo(43, xid_class, action, "why"))

    store.record_xid_and_cursor(item, KernelLogCursor("boot-a", 7))

    (row,) = store.list_events(kind="xid")
    assert row.severity is expected
    assert xid_severity(item) is expected


def test_xid_identity_is_completed_from_the_pci_address(store: Store) -> None:
    store.record_samples(poll(at(0), card(0), card(1), card(2)))

    store.add_xid_event(_xid(3))

    (row,) = store.list_events(kind="xid")
    assert (row.card, row.card_uuid, row.card_serial) == (1, "GPU-test-1", "SN0001")


def _check(check_id: str, severity: Severity, card_index: int | None = None) -> CheckResult:
    return CheckResult(check_id, card_index, severity, f"{check_id} is {severity}", "fix it")


def test_check_transitions_are_recorded_only_on_change(store: Store) -> None:
    store.record_samples(poll(at(0), card(0), card(1)))
    healthy = [_check("power_cap", Severity.OK, 0), _check("card_count", Severity.OK)]
    capped = [_check("power_cap", Severity.WARNING, 0), _check("card_count", Severity.OK)]

    assert store.record_check_transitions(healthy, now=at(1)) == []
    assert store.record_check_transitions(capped, now=at(2)) == [capped[0]]
    assert store.record_check_transitions(capped, now=at(3)) == []
    assert store.record_check_transitions(capped, now=at(4)) == []
    assert store.record_check_transitions(healthy, now=at(5)) == [healthy[0]]

    rows = store.list_events(kind="check")
    assert [(r.severity, r.card, r.ts) for r in rows] == [("ok", 0, at(5)), ("warning", 0, at(2))]
    assert rows[1].message == "power_cap ok -> warning: power_cap is warning"
    assert rows[1].details == {"check": "power_cap", "previous": "ok", "remedy": "fix it"}
    assert rows[1].card_uuid == "GPU-test-0"
    assert store.check_severities() == {"power_cap:0": "ok"}


def test_check_states_survive_a_reopen(store_url: str) -> None:
    first = Store.open(store_url)
    try:
        assert first.record_check_transitions([_check("vram_unlocked", Severity.CRITICAL, 2)])
    finally:
        first.close()
    second = Store.open(store_url)
    try:
        assert (
            second.record_check_transitions([_check("vram_unlocked", Severity.CRITICAL, 2)]) == []
        )
        assert len(second.list_events(kind=EventKind.CHECK)) == 1
    finally:
        second.close()


def test_latch_set_clear_and_the_clearing_event(store: Store) -> None:
    assert store.get_latch() is None

    latch = store.set_latch(
        "Xid 79 on card 1", "recovery", advice=Advice.COLD_POWER_CYCLE, now=at(10)
    )
    again = store.set_latch("Xid 154 on card 2", "recovery", now=at(20))

    assert latch == again
    assert (latch.reason, latch.source, latch.since, latch.advice) == (
        "Xid 79 on card 1",
        "recovery",
        at(10),
        Advice.COLD_POWER_CYCLE,
    )
    assert store.get_latch() == latch

    cleared = store.clear_latch("card reseated", by="alice", how="operator", now=at(30))

    assert cleared == latch
    assert store.get_latch() is None
    (event,) = store.list_events(kind="operator")
    assert event.ts == at(30)
    assert event.message == "reboot-required latch cleared by alice (operator): card reseated"
    assert event.details is not None
    assert event.details["latch_reason"] == "Xid 79 on card 1"
    assert store.clear_latch("again", by="alice", how="operator") is None
    assert len(store.list_events(kind="operator")) == 1

    store.set_latch("Xid 31", "recovery", now=at(40))
    store.clear_latch("the host rebooted", by="fleetd", how="reboot", now=at(50))
    (reboot,) = store.list_events(kind="reboot")
    assert "fleetd (reboot)" in reboot.message


def test_unknown_way_to_clear_the_latch_is_refused(store: Store) -> None:
    store.set_latch("Xid 79", "recovery")
    with pytest.raises(StoreInputError, match="expected reboot\\|operator"):
        store.clear_latch("x", by="alice", how="magic")  # type: ignore[arg-type]
    assert store.get_latch() is not None


def test_small_values_round_trip(store: Store) -> None:
    assert store.get_boot_id() is None
    store.set_boot_id("boot-a")
    store.set_boot_id("boot-b")
    assert store.get_boot_id() == "boot-b"

    assert store.get_serving_state() is None
    store.set_serving_state({"state": "ready", "pid": 4321, "restarts": 2})
    assert store.get_serving_state() == {"state": "ready", "pid": 4321, "restarts": 2}
