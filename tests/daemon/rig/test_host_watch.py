"""fleetd's host watch over a simulated rig: facts once a minute, the counter window, the
baseline recorded at the first start (and not when the config holds one), the status part."""

from __future__ import annotations

import logging
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from daemon.rig.host_watch import COUNTER_WINDOW_S, HostWatch
from daemon.statedir import StateDir
from hwcheck.host import HostSources
from hwcheck.hostfacts.baseline import HostBaseline, load_baseline_file
from hwcheck.hostfacts.document import card_bus_fields
from hwcheck.hostfacts.model import HostFacts
from hwcheck.model import EventKind, RigSnapshot, Severity
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.clocks import ManualClock, ManualWallClock


class Counted:
    """The simulated host's facts reader, counting its calls (a host-source boundary)."""

    def __init__(self, sources: HostSources) -> None:
        assert sources.host_facts is not None
        self._read = sources.host_facts
        self.calls = 0

    def __call__(self, snapshot: RigSnapshot) -> HostFacts:
        self.calls += 1
        return self._read(snapshot)


class Watch:
    """A host watch over a simulated rig, with its clock, reader count and events."""

    def __init__(
        self, tmp_path: Path, scenario: str = "healthy", pins: HostBaseline | None = None
    ) -> None:
        self.clock = ManualClock()
        self.state = tmp_path / "state"
        self.rig = SimulatedRig(
            load_scenario(scenario), self.state, clock=self.clock, wall_clock=ManualWallClock()
        )
        sources = self.rig.host_sources()
        self.reader = Counted(sources)
        self.sources = replace(sources, host_facts=self.reader)
        self.events: list[tuple[EventKind, Severity, str]] = []
        self.watch = HostWatch(
            self.sources,
            pins or HostBaseline(),
            self.state,
            record_event=lambda *event: self.events.append(event),
            tensor_parallel_size=lambda: 2,
            clock=self.clock,
        )

    def poll(self) -> Any:
        return self.watch.on_poll(self.sources.gpu.snapshot())


def test_facts_are_read_once_a_minute_and_after_a_reboot(tmp_path: Path) -> None:
    watch = Watch(tmp_path)
    watch.poll()
    for _ in range(29):
        watch.clock.advance(2)
        watch.poll()
    assert watch.reader.calls == 1
    watch.clock.advance(2)
    watch.poll()
    assert watch.reader.calls == 2
    watch.watch.new_boot()
    inputs = watch.poll()
    assert watch.reader.calls == 3
    assert len(inputs.counters) == 1  # a new boot counts errors afresh


def test_the_counter_window_keeps_the_last_minutes(tmp_path: Path) -> None:
    watch = Watch(tmp_path, "riser-errors")
    for _ in range(200):
        inputs = watch.poll()
        watch.clock.advance(2)
    span_s = inputs.counters[-1].monotonic_s - inputs.counters[0].monotonic_s
    assert span_s <= COUNTER_WINDOW_S
    assert span_s >= COUNTER_WINDOW_S - 2
    with_aer = [sample for sample in inputs.counters if sample.aer]
    assert len(with_aer) >= 4  # the AER counters come with each minute's facts
    assert inputs.tensor_parallel_size == 2


def test_the_first_start_records_the_baseline_once(tmp_path: Path) -> None:
    watch = Watch(tmp_path, "stock-kernel")  # the simulated rig was initialised healthy

    inputs = watch.poll()

    path = StateDir(watch.state).host_baseline
    recorded = load_baseline_file(path)
    assert recorded is not None
    assert recorded.kernel_release == "6.8.12-cmp-bar1"
    assert inputs.baseline.kernel_release == "6.8.12-cmp-bar1"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(watch.events) == 1
    kind, severity, message = watch.events[0]
    assert (kind, severity) == (EventKind.DAEMON, Severity.INFO)
    assert "host baseline recorded" in message
    watch.clock.advance(120)
    watch.poll()
    assert len(watch.events) == 1


def test_a_restarted_fleetd_keeps_the_recorded_baseline(tmp_path: Path) -> None:
    first = Watch(tmp_path)
    first.poll()
    path = StateDir(first.state).host_baseline
    path.write_text(path.read_text().replace("6.8.12-cmp-bar1", "6.8.12-older", 1))

    again = HostWatch(
        first.sources,
        HostBaseline(),
        first.state,
        record_event=lambda *event: first.events.append(event),
    )
    inputs = again.on_poll(first.sources.gpu.snapshot())

    assert inputs.baseline.kernel_release == "6.8.12-older"
    assert len(first.events) == 1  # recorded once, not again


def test_a_config_with_host_facts_records_nothing_and_its_pins_win(tmp_path: Path) -> None:
    pins = HostBaseline(kernel_release="6.8.12-pinned")
    watch = Watch(tmp_path, pins=pins)

    inputs = watch.poll()

    assert not StateDir(watch.state).host_baseline.exists()
    assert watch.events == []
    assert inputs.baseline.kernel_release == "6.8.12-pinned"


def test_a_damaged_baseline_file_is_kept_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watch = Watch(tmp_path)
    path = StateDir(watch.state).host_baseline
    path.write_text("[host]\nkernel = 1\n")

    with caplog.at_level(logging.ERROR, logger="fleetd"):
        watch.poll()
        watch.clock.advance(120)
        inputs = watch.poll()

    assert path.read_text() == "[host]\nkernel = 1\n"
    assert not inputs.baseline.recorded
    assert len([r for r in caplog.records if "not a host baseline" in r.getMessage()]) == 1


def test_the_status_gets_the_host_section_and_card_bus_facts(tmp_path: Path) -> None:
    watch = Watch(tmp_path, "riser-errors")
    watch.poll()

    status = watch.watch.status()

    host = status.section
    assert host["facts"]["running_kernel"] == "6.8.12-cmp-bar1"
    assert host["baseline"]["kernel_release"] == "6.8.12-cmp-bar1"
    assert host["baseline"]["pcie_errors_warn_per_min"] == 1.0
    assert host["tensor_parallel_size"] == 2
    card = card_bus_fields(status.facts, "0000:41:00.0")
    assert (card["driver"], card["bridges"], card["uplink_gen"]) == ("nvidia", ["0000:00:03.1"], 2)
    assert card["aer"] == {"correctable": 0, "nonfatal": 0, "fatal": 0}
    unknown = card_bus_fields(status.facts, "x")
    assert (unknown["driver"], unknown["aer"]) == (None, None)
    assert watch.watch.aer_counters()
    assert watch.watch.status().section == host  # built once per read of the facts


def test_without_host_facts_nothing_is_read_or_recorded(tmp_path: Path) -> None:
    watch = Watch(tmp_path)
    bare = replace(watch.sources, host_facts=None)
    host_watch = HostWatch(bare, HostBaseline(), watch.state, record_event=lambda *e: None)

    inputs = host_watch.on_poll(bare.gpu.snapshot())

    assert inputs.facts is None
    assert not StateDir(watch.state).host_baseline.exists()
