"""Scenario files: built-ins load with the facts the reference names; bad ones fail in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hwcheck.model import ClockEventReason, normalize_pci_bus_id
from hwcheck.sim.scenario import (
    BrakeStep,
    LoseCardStep,
    ScenarioError,
    SetCardStep,
    XidStep,
    builtin_scenario_names,
    load_scenario,
)

CONTRACT_SCENARIOS = {
    "healthy",
    "locked-vram",
    "power-brake",
    "uncapped",
    "xid31",
    "engine-corrupt",
}


def test_builtin_names_cover_the_contract_list_and_the_benchmark_rig() -> None:
    names = builtin_scenario_names()
    assert CONTRACT_SCENARIOS | {"healthy-8"} <= set(names)
    assert names == sorted(names)


@pytest.mark.parametrize("name", sorted(CONTRACT_SCENARIOS | {"healthy-8"}))
def test_every_builtin_loads_with_distinct_card_identities(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name
    assert scenario.description
    addresses = [card.pci_bus_id for card in scenario.cards]
    uuids = [card.uuid for card in scenario.cards]
    serials = [card.serial for card in scenario.cards]
    assert len(set(addresses)) == len(addresses)
    assert len(set(uuids)) == len(uuids)
    assert len(set(serials)) == len(serials)
    for position, card in enumerate(scenario.cards):
        assert card.index == position
        assert card.pci_bus_id == normalize_pci_bus_id(card.pci_bus_id)
        assert card.uuid.startswith("GPU-")
        assert card.serial is not None
        assert len(card.serial) == 13
        assert card.pci_device_id == 0x20C2
        assert not card.lost


def test_identities_are_deterministic_across_loads() -> None:
    first = load_scenario("healthy")
    second = load_scenario("healthy")
    assert [c.uuid for c in first.cards] == [c.uuid for c in second.cards]
    assert [c.serial for c in first.cards] == [c.serial for c in second.cards]


def test_healthy_is_four_unlocked_capped_gen2_x4_cards() -> None:
    scenario = load_scenario("healthy")
    assert [c.pci_bus_id for c in scenario.cards] == [
        "0000:01:00.0",
        "0000:21:00.0",
        "0000:41:00.0",
        "0000:61:00.0",
    ]
    for card in scenario.cards:
        assert card.memory_total_mib == 65536
        assert card.power_limit_w == 180.0
        assert card.power_default_limit_w == 250.0
        assert (card.power_min_limit_w, card.power_max_limit_w) == (100.0, 300.0)
        assert (card.pcie_gen_current, card.pcie_width_current) == (2, 4)
        assert (card.pcie_gen_max, card.pcie_width_max) == (2, 4)
        assert card.persistence_mode is True
        assert not card.power_brake_active
        assert card.temperature_c is not None
        assert 45.0 <= card.temperature_c <= 60.0
        assert card.fan_speed_pct is None  # "n/a" in the file
        assert card.vbios_version == "92.00.6D.00.0A"
    assert scenario.timeline == ()
    assert dict(scenario.engine) == {}  # no [engine] table: serving's defaults apply


def test_healthy_8_has_eight_cards_at_spread_addresses() -> None:
    scenario = load_scenario("healthy-8")
    assert len(scenario.cards) == 8
    assert scenario.cards[7].pci_bus_id == "0000:e1:00.0"
    assert all(card.memory_total_mib == 65536 for card in scenario.cards)


def test_locked_vram_locks_card_2_only() -> None:
    memory = [card.memory_total_mib for card in load_scenario("locked-vram").cards]
    assert memory == [65536, 65536, 8192, 65536]


def test_power_brake_is_the_b30_signature_on_every_card() -> None:
    for card in load_scenario("power-brake").cards:
        assert card.power_brake_active
        assert card.power_brake_unexplained
        assert card.clock_event_reasons == ClockEventReason.HW_POWER_BRAKE_SLOWDOWN
        assert card.power_draw_w == 88.0
        assert card.sm_clock_mhz == 1140


def test_uncapped_runs_at_the_default_limit() -> None:
    for card in load_scenario("uncapped").cards:
        assert card.power_limit_w == 250.0
        assert card.power_limit_w == card.power_default_limit_w


def test_xid31_fires_an_xid_31_on_card_1_about_20_s_after_boot() -> None:
    (step,) = load_scenario("xid31").timeline
    assert isinstance(step, XidStep)
    assert (step.card, step.xid) == (1, 31)
    assert 15.0 <= step.at_s <= 25.0
    assert step.message is not None
    assert "MMU Fault" in step.message


def write(tmp_path: Path, text: str, name: str = "custom.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_user_file_with_every_section_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
description = "two cards, one foreign process"
card_count = 3
[rig]
power_limit_w = 170
memory_temperature_c = "n/a"
[[cards]]
pci_bus_id = "00000000:0A:00.0"
[[cards]]
uuid = "GPU-11111111-2222-3333-4444-555555555555"
lost = true
lost_reason = "GPU is lost"
[[timeline]]
at_s = 5
action = "set"
card = 2
fields = {temperature_c = 70.5, memory_total_mib = 8192}
[[timeline]]
at_s = 6.5
action = "brake"
on = true
[[timeline]]
at_s = 7
action = "lose_card"
card = 0
[host]
foreign_processes = [{pid = 1234, name = "Xorg", device = "/dev/nvidia0"}]
extra_pci_devices = [{pci_bus_id = "0000:81:00.0"}]
boot_log = ["hello"]
[engine]
ready_after_s = 0.5
crash_after_s = 30
ignore_sigint = true
tokens_per_s = 12.5
""",
    )
    scenario = load_scenario(str(path))
    assert scenario.name == "custom"
    assert len(scenario.cards) == 3
    assert scenario.cards[0].pci_bus_id == "0000:0a:00.0"
    assert scenario.cards[0].power_limit_w == 170.0
    assert isinstance(scenario.cards[0].power_limit_w, float)
    assert scenario.cards[0].memory_temperature_c is None
    assert scenario.cards[1].uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert scenario.cards[1].lost
    assert scenario.cards[2].pci_bus_id == "0000:41:00.0"
    set_step, brake_step, lose_step = scenario.timeline
    assert isinstance(set_step, SetCardStep)
    assert dict(set_step.fields) == {"temperature_c": 70.5, "memory_total_mib": 8192}
    assert isinstance(brake_step, BrakeStep)
    assert (brake_step.card, brake_step.on, brake_step.at_s) == (None, True, 6.5)
    assert isinstance(lose_step, LoseCardStep)
    assert scenario.host.foreign_processes[0].name == "Xorg"
    assert scenario.host.extra_pci_devices[0].device_id == 0x20C2
    assert scenario.host.boot_log == ("hello",)
    # hwcheck keeps the [engine] table as written; serving.sim.scenario parses it
    assert dict(scenario.engine) == {
        "ready_after_s": 0.5,
        "crash_after_s": 30,
        "ignore_sigint": True,
        "tokens_per_s": 12.5,
    }


BAD_FILES = [
    pytest.param(
        "[host]\nnvml_delay_s = 1e308\n[[cards]]\n",
        "host.nvml_delay_s: must be 0 to 31536000 seconds (a year), got 1e+308",
        id="huge-seconds",
    ),
    pytest.param(
        "[host]\nnvml_delay_s = inf\n[[cards]]\n",
        "host.nvml_delay_s: expected a finite number, got inf",
        id="infinite-seconds",
    ),
    pytest.param(
        '[[cards]]\n[[timeline]]\nat_s = 1e400\naction = "xid"\ncard = 0\nxid = 31\n',
        "timeline[0].at_s: expected a finite number",
        id="infinite-at",
    ),
    pytest.param(
        "[rig]\npower_draw_w = nan\n[[cards]]\n",
        "rig.power_draw_w: expected a finite number, got nan",
        id="nan-reading",
    ),
    pytest.param(
        "[rig]\nmemory_total_gb = 64\n",
        "rig.memory_total_gb: unknown card field",
        id="unknown-card-field",
    ),
    pytest.param("colour = 1\n[[cards]]\n", "colour: unknown key", id="unknown-top-level-key"),
    pytest.param(
        '[[cards]]\n[[timeline]]\nat_s = 20.0\naction = "xid"\ncard = "one"\nxid = 31\n',
        'timeline[0].card: expected an integer, got "one"',
        id="wrong-type-timeline-card",
    ),
    pytest.param(
        '[[cards]]\n[[cards]]\nmemory_total_mib = "64G"\n',
        'cards[1].memory_total_mib: expected an integer or "n/a", got "64G"',
        id="wrong-type-card-field",
    ),
    pytest.param(
        "[[cards]]\npersistence_mode = 1\n",
        'cards[0].persistence_mode: expected true or false or "n/a", got 1',
        id="int-for-bool",
    ),
    pytest.param(
        "[[cards]]\nmemory_total_mib = true\n",
        "cards[0].memory_total_mib: expected an integer",
        id="bool-for-int",
    ),
    pytest.param(
        'card_count = 4\n[[timeline]]\nat_s = 1\naction = "lose_card"\ncard = 4\n',
        "timeline[0].card: card 4 does not exist (the scenario has 4 cards: 0 to 3)",
        id="card-out-of-range",
    ),
    pytest.param(
        'card_count = 2\n[[timeline]]\nat_s = 1\naction = "explode"\ncard = 0\n',
        'timeline[0].action: unknown action "explode"',
        id="unknown-action",
    ),
    pytest.param(
        'card_count = 2\n[[timeline]]\nat_s = 1\naction = "xid"\ncard = 0\nxid = 31\ncolor = 2\n',
        "timeline[0].color: unknown key",
        id="unknown-step-key",
    ),
    pytest.param(
        'card_count = 2\n[[timeline]]\naction = "xid"\ncard = 0\nxid = 31\n',
        "timeline[0].at_s: missing",
        id="missing-at",
    ),
    pytest.param(
        'card_count = 2\n[[timeline]]\nat_s = 1\naction = "set"\ncard = 0\nfields = {bogus = 1}\n',
        "timeline[0].fields.bogus: unknown card field",
        id="unknown-field-in-set",
    ),
    pytest.param(
        '[[cards]]\npci_bus_id = "slot 3"\n',
        'cards[0].pci_bus_id: not a PCI address: "slot 3"',
        id="bad-address",
    ),
    pytest.param(
        '[[cards]]\npci_bus_id = "0000:01:00.0"\n[[cards]]\npci_bus_id = "0000:01:00.0"\n',
        'cards[1].pci_bus_id: "0000:01:00.0" is already card 0\'s',
        id="duplicate-address",
    ),
    pytest.param(
        'card_count = 2\n[rig]\nuuid = "GPU-1"\n',
        "rig.uuid: must differ per card",
        id="shared-uuid",
    ),
    pytest.param("[rig]\n", "cards: the scenario has no cards", id="no-cards"),
    pytest.param(
        "card_count = 1\n[host]\nforeign_processes = [{pid = 1}]\n",
        "host.foreign_processes[0].name: missing",
        id="holder-missing-name",
    ),
    pytest.param(
        "card_count = 1\n[host]\nforeign_processes = "
        '[{pid = 1, name = "x", device = "/dev/nvidia0", ignores_signals = true}]\n',
        "host.foreign_processes[0].ignores_signals: only a container's process can",
        id="bare-process-ignoring-signals",
    ),
    pytest.param(
        'card_count = 1\n[host]\nnvml_unavailable = "broken"\n',
        "host.nvml_unavailable: one of driver_not_loaded, lib_rm_version_mismatch",
        id="nvml-down-kind",
    ),
    pytest.param(
        "card_count = 1\nengine = 3\n", "engine: expected a table, got 3", id="engine-not-table"
    ),
    pytest.param("card_count = 1\nrig = 3\n", "rig: expected a table, got 3", id="rig-not-a-table"),
    pytest.param("[rig\n", "not valid TOML", id="toml-syntax"),
    pytest.param(
        'card_count = 2\n[host]\ncuda_probe = { 1 = "wedged" }\n',
        "host.cuda_probe.1: one of ok, failed, timed_out, unavailable, got 'wedged'",
        id="cuda-probe-outcome",
    ),
    pytest.param(
        'card_count = 2\n[host]\ncuda_probe = { first = "failed" }\n',
        "host.cuda_probe.first: the key must be a card index",
        id="cuda-probe-key",
    ),
    pytest.param(
        'card_count = 2\n[host]\ncuda_probe = { 5 = "failed" }\n',
        "host.cuda_probe.5: card 5 does not exist (the scenario has 2 cards: 0 to 1)",
        id="cuda-probe-card",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_FILES)
def test_bad_files_fail_with_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text, "bad.toml")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"scenario {path}: ")
    assert expected in message


def test_a_missing_file_names_it_and_the_builtins(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(missing))
    message = str(caught.value)
    assert "\n" not in message
    assert str(missing) in message
    assert "no such file" in message
    assert "healthy" in message


def test_an_unknown_name_is_not_taken_for_a_builtin() -> None:
    with pytest.raises(ScenarioError, match=r"scenario heathy: no such file.*healthy"):
        load_scenario("heathy")


def test_large_rigs_get_distinct_default_addresses(tmp_path: Path) -> None:
    scenario = load_scenario(str(write(tmp_path, "card_count = 16\n")))
    addresses = [card.pci_bus_id for card in scenario.cards]
    assert len(set(addresses)) == 16
    assert addresses[8] == "0000:02:00.0"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("card_count = 0\n", "card_count: must be at least 1, got 0"),
        (
            "card_count = 1\n[[cards]]\n[[cards]]\n",
            "card_count: 1 is less than the 2 [[cards]] given",
        ),
    ],
)
def test_card_count_must_fit_the_cards(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(expected)):
        load_scenario(str(write(tmp_path, text)))
