"""Boot tracking in the store: a new boot id is a reboot, recorded with the latch cleared in
one transaction."""

from __future__ import annotations

from daemon.store import Store


def test_record_boot_first_same_and_new(store: Store) -> None:
    assert store.record_boot("boot-a") is None  # the first boot on a fresh store
    assert store.record_boot("boot-a") is None  # a daemon restart, same boot
    store.set_latch("Xid 79 on card 1", source="test")
    assert store.record_boot("boot-b") == "boot-a"
    assert store.get_boot_id() == "boot-b"
    assert store.get_latch() is None
    messages = [e.message for e in store.list_events(kind="reboot", limit=10)]
    assert "host rebooted (boot id boot-a -> boot-b)" in messages
    assert store.record_boot("boot-b") is None
    assert len(store.list_events(kind="reboot", limit=10)) == len(messages)
