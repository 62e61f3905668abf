"""A new boot under a running fleetd: every per-boot part starts afresh, in order.

``NewBoot`` (``daemon/ports/new_boot.py``) is what the poller calls when the boot id
changes and what the simulated reboot calls once its new boot exists. Recorders stand in
for the parts; the store is a real SQLite one (the boot is recorded there first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.ports.new_boot import NewBoot
from daemon.store import Store


class Recorder:
    """Any part: each call is noted as ``part.method(args)`` in one shared list."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self._name = name
        self._calls = calls
        self.submitted: list[Callable[[], None]] = []

    def __getattr__(self, method: str) -> Callable[..., None]:
        def call(*args: Any) -> None:
            self._calls.append(f"{self._name}.{method}({', '.join(map(str, args))})")

        return call

    def submit(self, job: Callable[[], None]) -> None:
        self._calls.append(f"{self._name}.submit")
        self.submitted.append(job)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    opened.record_boot("boot-1")
    yield opened
    opened.close()


def new_boot(store: Store, calls: list[str], stop: threading.Event) -> tuple[NewBoot, Recorder]:
    recovery = Recorder("recovery", calls)
    parts: dict[str, Any] = {
        name: Recorder(name, calls)
        for name in ("latch_state", "monitor", "host_watch", "recovery_memory", "follower")
    }
    boot = NewBoot(
        store,
        parts["latch_state"],
        parts["monitor"],
        parts["host_watch"],
        parts["recovery_memory"],
        recovery,
        parts["follower"],
        Recorder("bring_up", calls),
        stop,
    )
    return boot, recovery


def test_a_new_boot_id_stops_the_follower_then_begins_the_boot_and_brings_it_up(
    store: Store,
) -> None:
    calls: list[str] = []
    boot, recovery = new_boot(store, calls, threading.Event())
    boot.on_new_boot("boot-2")
    assert store.get_boot_id() == "boot-2"  # recorded first: it clears the latch
    assert calls == [
        "follower.stop()",
        "latch_state.new_boot(boot-2)",
        "monitor.new_boot(boot-2)",
        "host_watch.new_boot()",
        "recovery_memory.new_boot()",
        "recovery.new_boot(boot-2)",
        "follower.start()",
        "recovery.submit",
    ]
    recovery.submitted[0]()  # the recovery worker runs the bring-up
    assert calls[-1] == "bring_up.run(boot-2)"


def test_a_stopping_fleetd_does_not_bring_the_new_boot_up(store: Store) -> None:
    calls: list[str] = []
    stop = threading.Event()
    boot, recovery = new_boot(store, calls, stop)
    boot.begin_boot("boot-2")  # the simulated reboot: its follower is already stopped
    assert "follower.stop()" not in calls
    stop.set()
    recovery.submitted[0]()
    assert not any(call.startswith("bring_up.") for call in calls)
