"""SimulatedBackend and the rig's HostSources: what the checks and the daemon will read."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hwcheck.backend import BackendUnavailable, GpuBackend
from hwcheck.checks import CheckInput, run_checks
from hwcheck.kernellog.parser import parse_xid
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import ClockEventReason, GpuSnapshot, Severity
from hwcheck.sim.backend import POWER_DRAW_JITTER_W, TEMPERATURE_JITTER_C
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.clocks import ManualClock, ManualWallClock
from tests.support.sim_rigs import RigFactory


def test_host_sources_are_all_simulated(make_rig: RigFactory, tmp_path: Path) -> None:
    path = tmp_path / "host.toml"
    path.write_text(
        """
card_count = 2
[host]
foreign_processes = [{pid = 1234, name = "Xorg", device = "/dev/nvidia0", cmdline = "/usr/lib/xorg/Xorg :0"}]
extra_pci_devices = [{pci_bus_id = "0000:81:00.0", device_id = 0x2082}]
""",
        encoding="utf-8",
    )
    rig = make_rig(str(path))
    host = rig.host_sources()
    assert host.simulated is True
    assert isinstance(host.gpu, GpuBackend)
    assert host.gpu.name == "simulated"
    assert host.boot_id() == rig.boot_id()
    assert host.boot_id() != Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    devices = host.pci_devices()
    assert [(d.pci_bus_id, d.vendor_id, d.device_id) for d in devices] == [
        ("0000:01:00.0", 0x10DE, 0x20C2),
        ("0000:21:00.0", 0x10DE, 0x20C2),
        ("0000:81:00.0", 0x10DE, 0x2082),
    ]
    (holder,) = host.device_holders(frozenset())
    assert (holder.pid, holder.name, holder.device) == (1234, "Xorg", "/dev/nvidia0")
    # The scenario's processes have a pid space of their own: a real process of ours here
    # with the same number (an engine once was 812, persistenced's) leaves none of them out.
    assert host.device_holders(frozenset({1234})) == [holder]
    assert len(host.gpu.snapshot().cards) == 2
    host.close()


def test_the_kernel_log_holds_only_simulated_records(make_rig: RigFactory, state_dir: Path) -> None:
    rig = make_rig("healthy")
    rig.inject_xid(0, 79)
    history = rig.host_sources().kernel_log_history()
    written = (state_dir / "sim-kmsg.log").read_text().splitlines()
    assert [record.raw.rstrip("\n") for record in history] == written
    assert [record.seq for record in history] == list(range(len(written)))


def test_the_follower_sees_new_records_and_resumes_after_a_cursor(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    host = rig.host_sources()
    follower = host.open_kernel_log(None)
    try:
        # No cursor: this boot's records so far first (the boot log), like the real host.
        boot_log = follower.read_available()
        assert [r.seq for r in boot_log] == list(range(len(boot_log)))
        assert any("NVRM: GPU at PCI:" in r.text for r in boot_log)
        assert follower.read_available() == []
        seq = rig.inject_xid(2, 31)
        (record,) = follower.read_available()
        event = parse_xid(record.raw)
        assert event is not None
        assert (record.seq, event.xid, event.pci_bus_id) == (seq, 31, "0000:41:00.0")
    finally:
        follower.close()
    later = rig.inject_xid(3, 154)
    resumed = host.open_kernel_log(KernelLogCursor(boot_id=rig.boot_id(), last_seq=seq))
    try:
        assert [record.seq for record in resumed.read_available()] == [later]
    finally:
        resumed.close()


def test_after_a_reboot_an_old_cursor_reads_the_whole_new_boot(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    old_cursor = KernelLogCursor(boot_id=rig.boot_id(), last_seq=rig.inject_xid(0, 13))
    rig.reboot()
    follower = rig.host_sources().open_kernel_log(old_cursor)
    try:
        records = follower.read_available()
    finally:
        follower.close()
    assert records
    assert records[0].seq == 0
    assert {record.boot_id for record in records} == {rig.boot_id()}


def test_snapshot_has_every_card_and_the_rig_clocks(
    make_rig: RigFactory, clock: ManualClock, wall: ManualWallClock
) -> None:
    snapshot = make_rig("healthy").host_sources().gpu.snapshot()
    assert [card.index for card in snapshot.cards] == [0, 1, 2, 3]
    assert snapshot.taken_at == wall.now
    assert snapshot.monotonic_s == clock.now_s
    assert snapshot.driver_version == "580.95.05"
    assert snapshot.nvml_version == "13.580.95.05"


@pytest.mark.parametrize("name", ["healthy", "locked-vram", "uncapped", "xid31", "engine-corrupt"])
def test_healthy_readings_stay_far_from_every_threshold(make_rig: RigFactory, name: str) -> None:
    backend = make_rig(name).host_sources().gpu
    for _ in range(20):
        for card in backend.snapshot().cards:
            assert card.power_draw_w is not None
            assert card.power_limit_w is not None
            assert card.power_draw_w < card.power_limit_w - 100
            assert card.temperature_c is not None
            assert 44.0 <= card.temperature_c <= 61.0
            assert card.memory_temperature_c is not None
            assert card.memory_temperature_c < 75.0
            assert not card.power_brake_active


@pytest.mark.parametrize(
    ("name", "check"),
    [
        (
            "locked-vram",
            lambda cards: [c.memory_total_mib for c in cards] == [65536, 65536, 8192, 65536],
        ),
        ("uncapped", lambda cards: {c.power_limit_w for c in cards} == {250.0}),
        ("healthy", lambda cards: {c.power_limit_w for c in cards} == {180.0}),
    ],
)
def test_per_scenario_snapshot_facts(
    tmp_path: Path, name: str, check: Callable[[tuple[GpuSnapshot, ...]], bool]
) -> None:
    rig = SimulatedRig(load_scenario(name), tmp_path / name)
    assert check(rig.host_sources().gpu.snapshot().cards)


def test_power_brake_snapshot_is_the_b30_signature(tmp_path: Path) -> None:
    rig = SimulatedRig(load_scenario("power-brake"), tmp_path / "s")
    backend = rig.host_sources().gpu
    for _ in range(5):
        for card in backend.snapshot().cards:
            assert card.clock_event_reasons == ClockEventReason.HW_POWER_BRAKE_SLOWDOWN
            assert card.power_brake_unexplained
            assert card.power_draw_w is not None
            assert abs(card.power_draw_w - 88.0) <= POWER_DRAW_JITTER_W
            assert card.sm_clock_mhz == 1140


def test_jitter_is_small_deterministic_and_alive(tmp_path: Path) -> None:
    def series(folder: str) -> list[tuple[float | None, float | None]]:
        backend = SimulatedRig(load_scenario("healthy"), tmp_path / folder).host_sources().gpu
        return [
            (card.power_draw_w, card.temperature_c)
            for _ in range(10)
            for card in backend.snapshot().cards
        ]

    first, second = series("a"), series("b")
    assert first == second  # two rigs, same readings: nothing random
    base = load_scenario("healthy").cards
    draws = [draw for draw, _ in first]
    assert len(set(draws)) > 4  # the readings move
    for position, (draw, temp) in enumerate(first):
        card = base[position % 4]
        assert draw is not None
        assert temp is not None
        assert card.power_draw_w is not None
        assert card.temperature_c is not None
        assert abs(draw - card.power_draw_w) <= POWER_DRAW_JITTER_W
        assert abs(temp - card.temperature_c) <= TEMPERATURE_JITTER_C


def test_a_lost_card_keeps_its_identity_and_loses_its_readings(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    rig.lose_card(1, "GPU has fallen off the bus")
    card = rig.host_sources().gpu.snapshot().cards[1]
    base = rig.scenario.cards[1]
    assert card.lost
    assert card.lost_reason == "GPU has fallen off the bus"
    assert (card.index, card.pci_bus_id, card.uuid, card.serial) == (
        base.index,
        base.pci_bus_id,
        base.uuid,
        base.serial,
    )
    assert card.memory_total_mib is None
    assert card.power_draw_w is None
    assert card.clock_event_reasons is None


def test_a_closed_backend_says_so_and_closes_twice(make_rig: RigFactory) -> None:
    backend = make_rig("healthy").host_sources().gpu
    backend.close()
    backend.close()
    with pytest.raises(BackendUnavailable, match="closed"):
        backend.snapshot()
    with pytest.raises(BackendUnavailable, match="closed"):
        backend.set_power_limit(0, 180)


def _slow_scenario(tmp_path: Path, delay_s: float) -> str:
    path = tmp_path / "slow.toml"
    path.write_text(f"card_count = 2\n[host]\nnvml_delay_s = {delay_s}\n", encoding="utf-8")
    return str(path)


def test_a_slow_driver_within_the_call_timeout_only_slows_the_snapshot(
    make_rig: RigFactory, tmp_path: Path
) -> None:
    rig = make_rig(_slow_scenario(tmp_path, 0.2))
    gpu = rig.host_sources(nvml_timeout_s=5.0).gpu
    started_s = time.monotonic()
    snapshot = gpu.snapshot()
    assert time.monotonic() - started_s >= 0.2
    assert [card.lost for card in snapshot.cards] == [False, False]
    gpu.close()


def test_a_driver_slower_than_the_call_timeout_marks_every_card_lost(
    make_rig: RigFactory, tmp_path: Path
) -> None:
    """The delay is spent inside the timed NVML call, so a stuck driver loses the cards."""
    rig = make_rig(_slow_scenario(tmp_path, 1.0))
    gpu = rig.host_sources(nvml_timeout_s=0.2).gpu
    started_s = time.monotonic()
    first = gpu.snapshot()
    assert time.monotonic() - started_s < 0.9, "the caller stopped waiting at the timeout"
    assert [card.lost for card in first.cards] == [True, True]
    assert first.cards[0].lost_reason == "NVML call timed out after 0.2 s"
    assert first.cards[1].pci_bus_id == "0000:21:00.0", "a lost card keeps its identity"
    # While the stuck read has not returned, the cards stay lost without another call.
    again = gpu.snapshot()
    assert [card.lost for card in again.cards] == [True, True]
    assert "has not returned" in (again.cards[0].lost_reason or "")
    results = run_checks(CheckInput(samples=[again]))
    lost = [r for r in results if r.id == "card_lost"]
    assert [r.severity for r in lost] == [Severity.CRITICAL, Severity.CRITICAL]
    gpu.close()
