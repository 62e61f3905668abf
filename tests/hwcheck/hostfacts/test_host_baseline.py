"""The host baseline: recorded from facts, merged with the config's pins, written as the
``[host]`` table and read back; the config's ``[host]`` validated like every section."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.config import ConfigError, load_settings
from hwcheck.hostfacts.baseline import (
    BaselineFileError,
    CardBaseline,
    HostBaseline,
    baseline_toml,
    load_baseline_file,
    merge_baseline,
    record_baseline,
)
from hwcheck.hostfacts.model import P2pPair, P2pStatus
from tests.support.cards import bus_id, make_card, make_lost_card, make_rig
from tests.support.hosts import KERNEL, REQUIRED, make_baseline, make_host

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def test_recording_keeps_the_facts_a_rig_depends_on() -> None:
    host = make_host()
    pairs = tuple(
        P2pPair(p.a, p.b, P2pStatus.NOT_SUPPORTED) if bus_id(3) in (p.a, p.b) else p
        for p in host.p2p
    )
    snapshot = make_rig([make_card(0), make_card(1), make_card(2), make_lost_card(3)])

    baseline = record_baseline(snapshot, replace(host, p2p=pairs), NOW)

    assert baseline.recorded
    assert (baseline.kernel_release, baseline.required_cmdline) == (KERNEL, REQUIRED)
    assert baseline.default_boot_kernel == KERNEL
    assert baseline.boot_args is not None
    assert "iommu=pt" in baseline.boot_args
    assert baseline.recorded_at == "2026-12-03T09:00:00+00:00"
    assert sorted(baseline.cards) == [bus_id(0), bus_id(1), bus_id(2)]  # a lost card: nothing
    card = baseline.card(bus_id(0))
    assert (card.bar1_mib, card.vbios, card.memory_clock_max_mhz) == (65536, "92.00.6D.00.0A", 1728)
    assert (card.driver, card.bridge, card.uplink_gen, card.uplink_width) == (
        "nvidia",
        "0000:10:00.0",
        4,
        16,
    )
    assert card.p2p_ok == (bus_id(1), bus_id(2))  # card 3's pairs were not OK


def test_pins_win_key_by_key_cards_too() -> None:
    recorded = make_baseline()
    pins = HostBaseline.model_validate(
        {
            "kernel_release": "6.9.0-new",
            "pcie_errors_warn_per_min": 5,
            "cards": {bus_id(1): {"vbios": "92.00.6E.00.01"}},
        }
    )

    merged = merge_baseline(recorded, pins)

    assert merged.kernel_release == "6.9.0-new"
    assert merged.module_srcversion == recorded.module_srcversion
    assert merged.pcie_errors_warn_per_min == 5
    assert merged.card(bus_id(1)).vbios == "92.00.6E.00.01"
    assert merged.card(bus_id(1)).bar1_mib == 65536  # the rest of the card stays recorded
    assert merged.card(bus_id(2)) == recorded.card(bus_id(2))


def test_nothing_recorded_and_only_a_knob_is_not_a_baseline() -> None:
    only_knob = HostBaseline(pcie_errors_warn_per_min=3.0)

    assert not only_knob.recorded
    assert merge_baseline(None, only_knob) == only_knob
    assert only_knob.card(bus_id(0)) == CardBaseline()


def test_the_toml_form_reads_back_as_the_same_baseline(tmp_path: Path) -> None:
    baseline = make_baseline(registry_dwords="")
    path = tmp_path / "host-baseline.toml"
    path.write_text("# a comment\n" + baseline_toml(baseline))

    loaded = load_baseline_file(path)

    assert loaded == baseline
    assert 'registry_dwords = ""' in path.read_text()  # set to nothing is kept, not dropped
    assert "pcie_errors_warn_per_min" not in path.read_text()  # a knob is the config's


def test_the_toml_form_is_a_valid_config_host_table(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(baseline_toml(make_baseline()))

    settings = load_settings(config, environ={})

    assert settings.host == make_baseline()


def test_a_missing_file_is_no_baseline_and_a_bad_one_one_line(tmp_path: Path) -> None:
    assert load_baseline_file(tmp_path / "absent.toml") is None
    bad = tmp_path / "bad.toml"
    bad.write_text("[host]\nkernel = 1\n")

    with pytest.raises(BaselineFileError) as caught:
        load_baseline_file(bad)

    assert str(caught.value).startswith(f"{bad}: not a host baseline: ")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[host]\nkernel = 'x'\n", "unknown key 'host.kernel' (did you mean 'kernel_release'?)"),
        (
            "[host.cards.'0000:01:00.0']\nbar1 = 1\n",
            "unknown key 'host.cards.0000:01:00.0.bar1' (did you mean 'bar1_mib'?)",
        ),
        (
            "[host]\npcie_errors_warn_per_min = 0\n",
            "host.pcie_errors_warn_per_min: Input should be greater than 0",
        ),
        ("[host.cards.'nope']\nbar1_mib = 1\n", "host.cards: Value error, not a PCI address"),
        ("[host.cards.'0000:01:00.0']\nbridge = 'x'\n", "not a PCI address"),
    ],
)
def test_a_bad_host_table_is_one_config_line(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(text)

    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})

    assert "\n" not in str(caught.value)
    assert expected.replace("Value error, ", "") in str(caught.value)


def test_card_addresses_are_normalised() -> None:
    baseline = HostBaseline.model_validate(
        {"cards": {"00000000:01:00.0": {"bridge": "0000:00:01.1", "p2p_ok": ["02:00.0"]}}}
    )

    card = baseline.card("0000:01:00.0")
    assert card.p2p_ok == ("0000:02:00.0",)
