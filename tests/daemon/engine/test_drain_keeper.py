"""The drain's keeper (``daemon.engine.drain``) against a real store and a scripted guard.

The guard is faked at its boundary (``DrainGuard``: what its sync last reported); the
store is the real SQLite one. A confirmed reboot's drain waits until the guard took the
drain with nothing running, or for its grace; it ends once the host booted again, a
person's does not; a drain outlives its keeper (a fleetd restart); a store that cannot
write refuses a person's drain but never a reboot's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.engine.drain import DrainKeeper
from daemon.store import Store, StoreError
from serving.errors import InvalidInput, Unavailable


class ScriptedGuard:
    """What the guard's last sync said: whether it drains, how many requests run."""

    def __init__(self, in_flight: int | None = 0) -> None:
        self.running = in_flight
        self.taken = False
        self.syncs = 0

    def sync_now(self) -> None:
        self.syncs += 1
        self.taken = True  # the guard takes the drain at the next sync

    def in_flight(self) -> int | None:
        return self.running

    def drain_taken(self) -> bool:
        return self.taken


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


class Boot:
    def __init__(self) -> None:
        self.id = "boot-1"


def _keeper(
    store: Store, guard: ScriptedGuard | None, boot: Boot, grace_s: float = 30.0
) -> DrainKeeper:
    return DrainKeeper(store, lambda: boot.id, grace_s, guard, lambda: None)


def test_a_reboot_drain_returns_once_the_guard_is_quiet(store: Store) -> None:
    guard = ScriptedGuard(in_flight=2)
    keeper = _keeper(store, guard, Boot())
    answer: list[str] = []
    waiting = threading.Thread(target=lambda: answer.append(keeper.before_reboot("api").words))
    waiting.start()
    deadline_s = time.monotonic() + 10
    while guard.syncs == 0 and time.monotonic() < deadline_s:
        waiting.join(0.05)
    assert waiting.is_alive(), "it returned while two requests still ran"
    guard.running = 0
    waiting.join(10)
    assert not waiting.is_alive()
    assert answer[0].startswith("drained in ")
    assert keeper.document()["quiet"] is True and keeper.document()["until_reboot"] is True


def test_a_reboot_drain_gives_up_at_its_grace(store: Store) -> None:
    keeper = _keeper(store, ScriptedGuard(in_flight=1), Boot(), grace_s=0.3)
    began_s = time.monotonic()
    assert keeper.before_reboot("api").words.startswith("drained for its grace of 0.3 s")
    assert time.monotonic() - began_s >= 0.3


def test_without_a_guard_a_reboot_drain_does_not_wait(store: Store) -> None:
    keeper = _keeper(store, None, Boot(), grace_s=600)
    assert keeper.before_reboot("api").words == "no guard answers: nothing to drain"
    assert keeper.document()["draining"] is True


def test_the_reboot_drain_ends_after_the_boot_and_a_persons_does_not(store: Store) -> None:
    boot = Boot()
    keeper = _keeper(store, ScriptedGuard(), boot)
    keeper.before_reboot("api")
    boot.id = "boot-2"
    assert keeper.current() is None and keeper.guard_words() is None
    keeper.drain(60, "cli", "new risers")
    boot.id = "boot-3"
    assert keeper.guard_words() == "new risers"
    assert keeper.undrain("cli")["draining"] is False


def test_a_drain_outlives_its_keeper(store: Store) -> None:
    boot = Boot()
    _keeper(store, ScriptedGuard(), boot).drain(45, "api", "maintenance")
    again = _keeper(store, ScriptedGuard(), boot).document()
    assert (again["draining"], again["grace_s"], again["reason"]) == (True, 45, "maintenance")


def test_a_bad_grace_is_one_line(store: Store) -> None:
    with pytest.raises(InvalidInput, match="grace_s -1: expected 0 to 86400 seconds"):
        _keeper(store, None, Boot()).drain(-1, "api")


def test_a_store_that_cannot_write_refuses_a_persons_drain_not_a_reboots(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = _keeper(store, None, Boot())

    def full(key: str, value: object) -> None:
        raise StoreError("database or disk is full")

    monkeypatch.setattr(store, "set_document", full)
    with pytest.raises(Unavailable, match="the drain could not be stored"):
        keeper.drain(10, "api")
    assert keeper.current() is None
    keeper.before_reboot("api")
    assert keeper.current() is not None
