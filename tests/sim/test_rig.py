"""SimulatedRig: boot id, timeline, fault injection and state that survives a restart.

Real files in a temp state dir, the real kernel-log writer/reader and the real Xid
parser; only the two clocks are stand-ins.
"""

from __future__ import annotations

import json
import math
import stat
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from hwcheck.backend import CardLostError, PowerLimitError
from hwcheck.cuda_results import ProbeOutcome
from hwcheck.kernellog.parser import parse_gpu_uuid_line, parse_xid
from hwcheck.model import XidEvent
from hwcheck.sim.rig import KMSG_FILE, KMSG_ROTATED_FILE, SimulatedRig, SimulationError
from hwcheck.sim.scenario import load_scenario
from hwcheck.sim.state import BOOT_ID_FILE, STATE_FILE, SimStateError
from tests.support.clocks import ManualClock, ManualWallClock
from tests.support.sim_rigs import RigFactory


def xid_events(rig: SimulatedRig) -> list[XidEvent]:
    events = [parse_xid(record.raw or record.text) for record in rig.kernel_log_history()]
    return [event for event in events if event is not None]


def test_first_start_creates_a_private_state_dir_with_a_boot(
    make_rig: RigFactory, state_dir: Path
) -> None:
    rig = make_rig("healthy")
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    boot_id = (state_dir / BOOT_ID_FILE).read_text().strip()
    assert uuid.UUID(boot_id).version == 4
    assert rig.boot_id() == boot_id
    state = json.loads((state_dir / STATE_FILE).read_text())
    assert state["boot_id"] == boot_id
    assert state["fired_steps"] == []
    # The boot log names every card's UUID at its address, like the driver does.
    mapped = dict(
        found
        for found in (parse_gpu_uuid_line(r.text) for r in rig.kernel_log_history())
        if found is not None
    )
    assert mapped == {card.pci_bus_id: card.uuid for card in rig.scenario.cards}
    assert all(record.boot_id == boot_id for record in rig.kernel_log_history())
    assert xid_events(rig) == []


def test_restart_with_any_scenario_is_not_a_reboot(make_rig: RigFactory) -> None:
    first = make_rig("healthy")
    seq_before = first.inject_xid(0, 13)
    second = make_rig("power-brake")
    assert second.boot_id() == first.boot_id()
    seq_after = second.inject_xid(0, 13)
    assert seq_after == seq_before + 1  # the same kernel log, numbering continued
    assert [event.seq for event in xid_events(second)] == [seq_before, seq_after]


def test_timeline_fires_at_its_simulated_time_and_never_again(
    make_rig: RigFactory, clock: ManualClock
) -> None:
    rig = make_rig("xid31")
    clock.advance(19.9)
    assert rig.tick() == []
    assert xid_events(rig) == []
    clock.advance(0.1)
    rig.host_sources().gpu.snapshot()  # a snapshot fires due steps too
    (event,) = xid_events(rig)
    assert (event.xid, event.pci_bus_id) == (31, "0000:21:00.0")
    assert (event.pid, event.process) == (13641, "python3")
    assert "MMU Fault" in event.message
    assert rig.tick() == []

    clock.advance(3600)
    restarted = make_rig("xid31")
    assert restarted.tick() == []
    restarted.host_sources().gpu.snapshot()
    assert len(xid_events(restarted)) == 1


def test_timeline_counts_from_the_boot_across_restarts(
    make_rig: RigFactory, state_dir: Path, wall: ManualWallClock
) -> None:
    clock_a = ManualClock(100.0)
    first = make_rig("xid31", clock=clock_a)
    clock_a.advance(10)
    assert first.tick() == []
    # The daemon is down for 5 s; the new process has a monotonic clock of its own.
    wall.advance(15)
    clock_b = ManualClock(9_999.0)
    second = make_rig("xid31", clock=clock_b)
    assert second.uptime_s() == pytest.approx(15.0)
    clock_b.advance(4.9)
    assert second.tick() == []
    clock_b.advance(0.2)
    assert second.tick() == ["0:xid@20"]
    assert len(xid_events(second)) == 1


def test_a_wall_clock_stepping_back_does_not_make_uptime_negative(
    make_rig: RigFactory, wall: ManualWallClock
) -> None:
    make_rig("healthy")
    wall.advance(-3600)
    assert make_rig("healthy").uptime_s() == 0.0


def test_timeline_set_brake_and_lose_steps_take_effect_and_persist(
    tmp_path: Path, state_dir: Path, clock: ManualClock, wall: ManualWallClock
) -> None:
    path = tmp_path / "steps.toml"
    path.write_text(
        """
card_count = 2
[[timeline]]
at_s = 1
action = "set"
card = 0
fields = {memory_total_mib = 8192}
[[timeline]]
at_s = 2
action = "brake"
on = true
[[timeline]]
at_s = 3
action = "lose_card"
card = 1
reason = "GPU has fallen off the bus"
""",
        encoding="utf-8",
    )
    scenario = load_scenario(str(path))
    rig = SimulatedRig(scenario, state_dir, clock, wall_clock=wall)
    clock.advance(2.5)
    cards = [sim.card for sim in rig.cards()]
    assert cards[0].memory_total_mib == 8192
    assert all(card.power_brake_unexplained for card in cards)
    assert not cards[1].lost
    wall.advance(3.5)  # a restart 3.5 s after the boot: only the wall clock bridges it
    restarted = SimulatedRig(scenario, state_dir, clock, wall_clock=wall)
    cards = [sim.card for sim in restarted.cards()]
    assert cards[0].memory_total_mib == 8192
    assert cards[1].lost
    assert cards[1].lost_reason == "GPU has fallen off the bus"
    assert len(json.loads((state_dir / STATE_FILE).read_text())["fired_steps"]) == 3


@pytest.mark.parametrize(
    ("xid", "expected_message"),
    [
        (31, "MMU Fault: ENGINE GRAPHICS"),
        (154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
        (79, "GPU has fallen off the bus."),
        (4242, "simulated Xid 4242"),
    ],
)
def test_inject_xid_writes_a_line_the_parser_reads_back(
    make_rig: RigFactory, state_dir: Path, xid: int, expected_message: str
) -> None:
    rig = make_rig("healthy")
    seq = rig.inject_xid(3, xid)
    raw_lines = (state_dir / KMSG_FILE).read_text().splitlines()
    (line,) = [raw for raw in raw_lines if f",{seq}," in raw and "NVRM: Xid" in raw]
    event = parse_xid(line)
    assert event is not None
    assert (event.xid, event.pci_bus_id, event.seq) == (xid, "0000:61:00.0", seq)
    assert expected_message in event.message
    assert event.pid is None
    assert event.process is None


def test_inject_xid_carries_message_pid_and_process(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    seq = rig.inject_xid(1, 13, "Graphics Exception: ESR 0x1", pid=4321, process="vllm")
    (event,) = xid_events(rig)
    assert (event.seq, event.xid, event.pid, event.process) == (seq, 13, 4321, "vllm")
    assert event.message == "Graphics Exception: ESR 0x1"


@pytest.mark.parametrize(
    ("card", "xid", "expected"),
    [
        (4, 31, "card 4 does not exist (the rig has 4 cards: 0 to 3)"),
        (-1, 31, "card -1 does not exist"),
        (0, 0, "xid: expected a positive integer, got 0"),
        (0, True, "xid: expected a positive integer, got True"),
    ],
)
def test_inject_xid_rejects_bad_input_in_one_line(
    make_rig: RigFactory, card: int, xid: int, expected: str
) -> None:
    rig = make_rig("healthy")
    with pytest.raises(SimulationError) as caught:
        rig.inject_xid(card, xid)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)
    assert xid_events(rig) == []


def test_reboot_is_a_new_boot_with_default_limits_and_a_fresh_log(
    make_rig: RigFactory, state_dir: Path, clock: ManualClock
) -> None:
    rig = make_rig("xid31")
    old_boot = rig.boot_id()
    clock.advance(21)
    rig.tick()
    rig.lose_card(2)
    rig.set_power_limit(0, 150)
    new_boot = rig.reboot()

    assert new_boot != old_boot
    assert rig.boot_id() == new_boot
    assert (state_dir / BOOT_ID_FILE).read_text().strip() == new_boot
    cards = [sim.card for sim in rig.cards()]
    assert [card.power_limit_w for card in cards] == [250.0] * 4
    assert [card.power_enforced_limit_w for card in cards] == [250.0] * 4
    assert not any(card.lost for card in cards)
    # The old boot's log is kept aside; the new one starts with only boot lines.
    rotated = (state_dir / KMSG_ROTATED_FILE).read_text()
    assert "NVRM: Xid (PCI:0000:21:00): 31" in rotated
    assert xid_events(rig) == []
    assert {record.boot_id for record in rig.kernel_log_history()} == {new_boot}
    assert rig.kernel_log_history()[0].seq == 0
    # The timeline starts over: the Xid 31 comes again 20 s into the new boot.
    clock.advance(19)
    assert rig.tick() == []
    clock.advance(1)
    assert rig.tick() == ["0:xid@20"]
    # And a restarted daemon keeps the new boot, its limits and its fired steps.
    again = make_rig("xid31")
    assert again.boot_id() == new_boot
    assert again.cards()[0].card.power_limit_w == 250.0
    assert again.tick() == []


def test_a_lost_card_stays_lost_across_restarts_until_reboot(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    rig.lose_card(1)
    restarted = make_rig("healthy")
    card = restarted.cards()[1].card
    assert card.lost
    assert card.lost_reason == "GPU is lost"
    assert "0000:21:00.0" in [device.pci_bus_id for device in restarted.pci_devices()]
    restarted.reboot()
    assert not make_rig("healthy").cards()[1].card.lost


def test_state_survives_kill_9(state_dir: Path) -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from hwcheck.sim.rig import SimulatedRig\n"
        "from hwcheck.sim.scenario import load_scenario\n"
        "rig = SimulatedRig(load_scenario('healthy'), Path(sys.argv[1]))\n"
        "rig.lose_card(3)\n"
        "rig.set_power_limit(0, 120)\n"
        "print(rig.boot_id(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdout is not None
        boot_id = child.stdout.readline().strip()
        child.kill()
    finally:
        child.wait(timeout=10)
        if child.stdin is not None:
            child.stdin.close()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -9
    rig = SimulatedRig(load_scenario("healthy"), state_dir)
    assert rig.boot_id() == boot_id
    assert rig.cards()[3].card.lost
    assert rig.cards()[0].card.power_limit_w == 120.0
    assert not list(state_dir.glob(".sim-state.json.*"))  # no temp file left behind


def test_set_card_changes_readings_until_reboot(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    changed = rig.set_card(2, memory_total_mib=8192, temperature_c=71.5)
    assert changed.memory_total_mib == 8192
    assert changed.temperature_c == 71.5
    snapshot = rig.host_sources().gpu.snapshot()
    card = snapshot.cards[2]
    assert card.memory_total_mib == 8192
    assert card.temperature_c == 71.5  # a value a test set is exact, never jittered
    rig.set_card(2, lost=True)
    assert rig.cards()[2].card.lost_reason == "GPU is lost"
    rig.set_card(2, lost=False)
    assert not rig.cards()[2].card.lost
    assert rig.cards()[2].card.lost_reason is None


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"memory_total_gib": 64}, "card 1: memory_total_gib: unknown card field"),
        (
            {"memory_total_mib": "8G"},
            'card 1: memory_total_mib: expected an integer or "n/a", got "8G"',
        ),
        ({"lost": "yes"}, 'card 1: lost: expected true or false, got "yes"'),
        ({"uuid": "GPU-x"}, "card 1: uuid: a card's identity cannot change"),
    ],
)
def test_set_card_rejects_bad_fields_in_one_line(
    make_rig: RigFactory, fields: dict[str, object], expected: str
) -> None:
    rig = make_rig("healthy")
    with pytest.raises(SimulationError) as caught:
        rig.set_card(1, **fields)
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)
    assert rig.cards()[1].overridden == frozenset()


def test_set_card_rejects_a_card_that_does_not_exist(make_rig: RigFactory) -> None:
    with pytest.raises(SimulationError, match="card 9 does not exist"):
        make_rig("healthy").set_card(9, lost=True)


def test_brake_on_and_off(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    rig.set_brake(None, on=True)
    cards = [sim.card for sim in rig.cards()]
    assert all(card.power_brake_unexplained for card in cards)
    assert {card.power_draw_w for card in cards} == {88.0}
    assert {card.sm_clock_mhz for card in cards} == {1140}
    rig.set_brake(1, on=False)
    cards = [sim.card for sim in rig.cards()]
    assert [card.power_brake_active for card in cards] == [True, False, True, True]
    assert cards[1].power_draw_w == rig.scenario.cards[1].power_draw_w
    assert cards[1].sm_clock_mhz == 1410


def test_releasing_the_brake_of_a_braked_scenario_gives_healthy_readings(
    make_rig: RigFactory,
) -> None:
    rig = make_rig("power-brake")
    rig.set_brake(0, on=False)
    card = rig.cards()[0].card
    assert not card.power_brake_active
    assert card.sm_clock_mhz == 1410
    assert card.power_draw_w is not None
    assert card.power_draw_w < 88.0


def test_set_power_limit_within_range_persists(make_rig: RigFactory) -> None:
    rig = make_rig("uncapped")
    backend = rig.host_sources().gpu
    backend.set_power_limit(0, 180)
    backend.set_power_limit(1, 100.0)  # the minimum itself is valid
    backend.set_power_limit(2, 300)  # and so is the maximum
    restarted = make_rig("uncapped")
    limits = [sim.card.power_limit_w for sim in restarted.cards()]
    assert limits == [180.0, 100.0, 300.0, 250.0]
    assert restarted.cards()[0].card.power_enforced_limit_w == 180.0


@pytest.mark.parametrize(
    ("index", "watts", "expected"),
    [
        (
            0,
            99.0,
            "card 0 (0000:01:00.0): power limit 99 W is not valid: it must be between 100 W and 300 W",
        ),
        (0, 300.5, "power limit 300.5 W is not valid"),
        (0, math.nan, "power limit must be a number of watts, got nan"),
        (0, True, "power limit must be a number of watts, got True"),
        (7, 180.0, "card 7: no such card (the rig has 4 cards: 0 to 3)"),
    ],
)
def test_set_power_limit_validates_like_nvml(
    make_rig: RigFactory, index: int, watts: float, expected: str
) -> None:
    rig = make_rig("uncapped")
    with pytest.raises(PowerLimitError) as caught:
        rig.host_sources().gpu.set_power_limit(index, watts)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)
    assert {sim.card.power_limit_w for sim in rig.cards()} == {250.0}


def test_set_power_limit_on_a_lost_card_says_it_is_lost(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    rig.lose_card(1)
    with pytest.raises(CardLostError) as caught:
        rig.host_sources().gpu.set_power_limit(1, 180)
    assert caught.value.index == 1


def test_a_damaged_state_file_is_one_clear_error(make_rig: RigFactory, state_dir: Path) -> None:
    make_rig("healthy")
    (state_dir / STATE_FILE).write_text("{not json")
    with pytest.raises(SimStateError) as caught:
        make_rig("healthy")
    message = str(caught.value)
    assert str(state_dir / STATE_FILE) in message
    assert "not JSON" in message
    assert "\n" not in message


def test_a_damaged_boot_id_is_one_clear_error(make_rig: RigFactory, state_dir: Path) -> None:
    make_rig("healthy")
    (state_dir / BOOT_ID_FILE).write_text("garbage\n")
    with pytest.raises(SimStateError, match="not a UUID"):
        make_rig("healthy")


def test_concurrent_injection_and_polling_keep_every_record(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    backend = rig.host_sources().gpu
    errors: list[BaseException] = []

    def inject(card: int) -> None:
        try:
            for _ in range(25):
                rig.inject_xid(card, 13)
                rig.set_card(card, memory_used_mib=1024)
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    def poll() -> None:
        try:
            for _ in range(25):
                backend.snapshot()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=inject, args=(card,)) for card in range(4)]
    threads.append(threading.Thread(target=poll))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    seqs = [event.seq for event in xid_events(rig) if event.seq is not None]
    assert len(seqs) == 100
    assert seqs == sorted(set(seqs))  # unique and in file order


def test_a_state_dir_that_cannot_be_created_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state dir should be")
    with pytest.raises(SimStateError) as caught:
        SimulatedRig(load_scenario("healthy"), blocker / "state")
    message = str(caught.value)
    assert message.startswith(f"simulated host state dir {blocker / 'state'}: cannot create it")
    assert "\n" not in message


def test_an_existing_state_dir_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o750)
    shared.chmod(0o750)
    SimulatedRig(load_scenario("healthy"), shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o750


def test_a_wedged_card_fails_the_cuda_probe_until_a_reboot(tmp_path: Path) -> None:
    """cuda-wedge: NVML sees card 1 healthy, the CUDA probe does not; a reboot clears it."""
    rig = SimulatedRig(load_scenario("cuda-wedge"), tmp_path)
    prober = rig.host_sources().cuda_prober
    assert prober is not None
    before = prober.probe([0, 1, 2])
    assert [(p.card, p.outcome) for p in before] == [
        (0, ProbeOutcome.OK),
        (1, ProbeOutcome.FAILED),
        (2, ProbeOutcome.OK),
    ]
    assert before[1].error == "CUDA_ERROR_DEVICE_UNAVAILABLE"
    assert not rig.host_sources().gpu.snapshot().cards[1].lost
    rig.reboot()
    assert {p.outcome for p in prober.probe([0, 1, 2])} == {ProbeOutcome.OK}
