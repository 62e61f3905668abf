"""persistence_mode, driver_version and foreign_gpu_processes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hwcheck.advice import RigNow
from hwcheck.model import DeviceHolder, RigProfile, Severity
from tests.support.cards import make_card, make_input, make_rig, result_for


@pytest.mark.parametrize(
    ("mode", "required", "severity", "words"),
    [
        (True, True, Severity.OK, "persistence mode on"),
        (False, True, Severity.WARNING, "persistence mode off"),
        (False, False, Severity.OK, "not required"),
        (None, True, Severity.OK, "not available"),
    ],
)
def test_persistence_mode(
    mode: bool | None, required: bool, severity: Severity, words: str
) -> None:
    inp = make_input(
        [make_rig([make_card(0, persistence_mode=mode)])],
        profile=RigProfile(require_persistence_mode=required),
    )

    result = result_for(inp, "persistence_mode", 0)

    assert result.severity is severity
    assert words in result.message
    if severity is Severity.WARNING:
        assert result.remedy == "nvidia-smi -pm 1 (or nvidia-persistenced)"


def test_one_driver_version_is_named() -> None:
    result = result_for(make_input(), "driver_version", None)

    assert result.severity is Severity.OK
    assert result.message == "driver 570.172.08 (library 570.172.08)"


def test_library_and_kernel_module_agreeing_is_ok() -> None:
    inp = replace(make_input(), kernel_module_version="570.172.08")
    result = result_for(inp, "driver_version", None)

    assert result.severity is Severity.OK
    assert result.message == "driver 570.172.08 (library 570.172.08, kernel module 570.172.08)"


def test_a_library_newer_than_the_loaded_kernel_module_is_a_warning() -> None:
    """An upgrade without a reboot: the cards all agree, the library and module do not."""
    inp = replace(make_input(), kernel_module_version="565.57.01")
    result = result_for(inp, "driver_version", None)

    assert result.severity is Severity.WARNING
    assert result.message == "NVML library 570.172.08 but kernel module 565.57.01 loaded"
    assert "reboot the host" in result.remedy


@pytest.mark.parametrize(
    ("pinned", "severity"), [("570.172.08", Severity.OK), ("580.95.05", Severity.WARNING)]
)
def test_the_driver_is_judged_against_the_pinned_version(pinned: str, severity: Severity) -> None:
    inp = replace(
        make_input(profile=RigProfile(driver_version=pinned)), kernel_module_version="570.172.08"
    )
    result = result_for(inp, "driver_version", None)

    assert result.severity is severity
    if severity is Severity.WARNING:
        assert result.message == (
            "driver 570.172.08 loaded, this rig expects 580.95.05 ([rig] driver_version)"
        )
        assert "install driver 580.95.05" in result.remedy


def test_mixed_driver_versions_are_a_warning_naming_the_cards() -> None:
    cards = [make_card(0), make_card(1, driver_version="565.57.01")]
    result = result_for(make_input([make_rig(cards)]), "driver_version", None)

    assert result.severity is Severity.WARNING
    assert "565.57.01: card 1" in result.message
    assert "570.172.08: system, card 0" in result.message
    assert "reboot" in result.remedy


def test_no_driver_version_at_all_is_a_warning() -> None:
    cards = [make_card(0, driver_version=None)]
    rig = replace(make_rig(cards, driver_version=None), nvml_version=None)
    result = result_for(make_input([rig]), "driver_version", None)

    assert result.severity is Severity.WARNING
    assert "not available" in result.message


def test_no_foreign_process_is_ok() -> None:
    assert result_for(make_input(), "foreign_gpu_processes", None).severity is Severity.OK


def test_foreign_holders_are_named_with_pid_and_devices() -> None:
    holders = [
        DeviceHolder(1234, "Xorg", "/dev/nvidia0", "/usr/lib/xorg/Xorg :0"),
        DeviceHolder(1234, "Xorg", "/dev/nvidiactl", "/usr/lib/xorg/Xorg :0"),
        DeviceHolder(2345, "sunshine", "/dev/nvidia1"),
    ]
    result = result_for(make_input(holders=holders), "foreign_gpu_processes", None)

    assert result.severity is Severity.WARNING
    assert "2 foreign process(es)" in result.message
    assert "pid 1234 Xorg (/dev/nvidia0, /dev/nvidiactl)" in result.message
    assert "pid 2345 sunshine (/dev/nvidia1)" in result.message
    assert result.remedy.startswith("Xorg, sunshine: a display server; stop the display manager")
    assert "container" not in result.remedy


def test_the_remedy_fits_what_holds_the_card() -> None:
    boxed = "docker 3f2a1b0c9d8e"
    holders = [
        DeviceHolder(4242, "python3", "/dev/nvidia2", "vllm serve", cgroup_container=boxed),
        DeviceHolder(5151, "python3", "/dev/nvidia3", "python3 bench.py"),
    ]
    result = result_for(make_input(holders=holders), "foreign_gpu_processes", None)

    assert "pid 4242 python3 in container docker 3f2a1b0c9d8e (/dev/nvidia2)" in result.message
    steps = result.remedy.split("; ")
    assert steps[0].startswith("container docker 3f2a1b0c9d8e: stop it (docker|podman stop")
    assert "--stop-foreign" in steps[0]
    assert steps[1].startswith("pid 5151 (python3): stop it")
    assert "[rig] allowed_gpu_processes" in steps[1]
    assert "Xorg" not in result.remedy and "display" not in result.remedy


def test_a_holder_of_cards_outside_the_profile_is_information_only() -> None:
    holders = [
        DeviceHolder(5151, "python3", "/dev/nvidia7", "python3 bench.py"),
        DeviceHolder(5151, "python3", "/dev/nvidia6", "python3 bench.py"),
    ]
    on_0_5 = RigNow(profile_cards=frozenset(range(6)))
    result = result_for(make_input(holders=holders, rig_now=on_0_5), "foreign_gpu_processes", None)

    assert result.severity is Severity.OK
    assert "on cards the profile in force does not use: pid 5151 python3" in result.message
    on_all = result_for(make_input(holders=holders), "foreign_gpu_processes", None)
    assert on_all.severity is Severity.WARNING  # a profile on every card: it is in the way
    on_control = [DeviceHolder(5151, "python3", "/dev/nvidiactl")]  # which card: unknown
    unknown = result_for(
        make_input(holders=on_control, rig_now=on_0_5), "foreign_gpu_processes", None
    )
    assert unknown.severity is Severity.WARNING


def test_persistenced_and_fleetd_are_never_foreign() -> None:
    holders = [
        DeviceHolder(812, "nvidia-persistenced", "/dev/nvidiactl"),
        DeviceHolder(812, "nvidia-persistenced", "/dev/nvidia0"),
        DeviceHolder(900, "fleetd", "/dev/nvidiactl"),
    ]
    result = result_for(make_input(holders=holders), "foreign_gpu_processes", None)

    assert result.severity is Severity.OK
    assert "pid 812 nvidia-persistenced (/dev/nvidia0, /dev/nvidiactl)" in result.message


def test_the_allow_list_takes_names_and_globs() -> None:
    holders = [
        DeviceHolder(1234, "Xorg", "/dev/nvidia0"),
        DeviceHolder(2345, "dcgm-exporter", "/dev/nvidia1"),
        DeviceHolder(3456, "sunshine", "/dev/nvidia1"),
    ]
    profile = RigProfile(allowed_gpu_processes=("Xorg", "dcgm-*"))
    result = result_for(make_input(holders=holders, profile=profile), "foreign_gpu_processes", None)

    assert result.severity is Severity.WARNING
    assert (
        result.message == "1 foreign process(es) hold GPU devices: pid 3456 sunshine (/dev/nvidia1)"
    )
