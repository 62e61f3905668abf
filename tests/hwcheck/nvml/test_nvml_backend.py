"""NvmlBackend against a fake ``pynvml`` that raises the real nvidia-ml-py exceptions.

No GPU here: the fake (tests/support/fake_pynvml.py) is the boundary, and it is built from
the installed ``pynvml`` (its constants, exception classes and ctypes structures), so a
misnamed constant or a wrong error class fails here, not on a rig.
"""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path

import pynvml
import pytest

from hwcheck.backend import (
    BackendUnavailable,
    CardLostError,
    GpuBackend,
    PowerLimitError,
)
from hwcheck.gpu_processes import ProcessNamer, container_of
from hwcheck.model import GpuProcess, GpuSnapshot
from hwcheck.nvml import gateway as nvml_gateway
from hwcheck.nvml.backend import MODULE_MISSING_MESSAGE, NvmlBackend
from hwcheck.nvml.gateway import NVML_NAMES_USED
from tests.support.fake_pynvml import FakeNvml, cmp170hx
from tests.support.waiting import wait_until

GATEWAY_SOURCE = Path(nvml_gateway.__file__)
ROOT = Path(__file__).resolve().parents[3]  # the repository


def make_fake(cards: int = 1, **kwargs: object) -> FakeNvml:
    return FakeNvml(pynvml, [cmp170hx(slot) for slot in range(cards)], **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def backends() -> Iterator[list[NvmlBackend]]:
    """Backends made by a test, closed afterwards (so no atexit hook outlives it)."""
    made: list[NvmlBackend] = []
    yield made
    for backend in made:
        backend.close()


@pytest.fixture
def make_backend(backends: list[NvmlBackend]) -> Callable[..., NvmlBackend]:
    def make(fake: FakeNvml, **kwargs: object) -> NvmlBackend:
        backend = NvmlBackend(fake, **kwargs)  # type: ignore[arg-type]
        backends.append(backend)
        return backend

    return make


def holds_within(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``predicate`` until it holds (True) or the deadline passes (False)."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.005)
    return True


def card(snapshot_cards: tuple[GpuSnapshot, ...], index: int) -> GpuSnapshot:
    (found,) = [c for c in snapshot_cards if c.index == index]
    return found


# -- healthy reads ---------------------------------------------------------------------


ENGINE_CGROUP = "0::/system.slice/docker-" + "3f2a1b0c9d8e" + "a" * 52 + ".scope\n"


def recorded_proc(root: Path) -> Path:
    """A ``/proc`` with the engine's worker (pid 4242) in a docker container."""
    (root / "4242").mkdir(parents=True)
    (root / "4242" / "comm").write_text("VLLM::Worker_PP\n")
    (root / "4242" / "cgroup").write_text(ENGINE_CGROUP)
    return root


def test_healthy_card_reads_every_field_with_units(
    make_backend: Callable[..., NvmlBackend], tmp_path: Path
) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].recovery_action = 1
    backend = make_backend(fake, processes=ProcessNamer(recorded_proc(tmp_path)))
    before_s = time.monotonic()

    rig = backend.snapshot()

    assert isinstance(backend, GpuBackend)
    assert backend.name == "nvml"
    assert rig.taken_at.tzinfo is UTC
    assert before_s <= rig.monotonic_s <= time.monotonic()
    assert rig.driver_version == "570.172.08"
    assert rig.nvml_version == "12.570.172.08"
    assert rig.cards == (
        GpuSnapshot(
            index=0,
            pci_bus_id="0000:01:00.0",
            uuid="GPU-6c9d7a8e-1f0b-4b5e-9a55-3f1c2d4e5a00",
            name="NVIDIA Graphics Device",
            serial="1324021012300",
            pci_device_id=0x20C2,
            vbios_version="92.00.6D.00.0A",
            driver_version="570.172.08",
            memory_total_mib=65536,
            memory_used_mib=459,
            power_draw_w=152.345,
            power_limit_w=180.0,
            power_enforced_limit_w=180.0,
            power_default_limit_w=250.0,
            power_min_limit_w=100.0,
            power_max_limit_w=300.0,
            energy_total_mj=987_654_321,
            clock_event_reasons=0,
            sm_clock_mhz=1410,
            memory_clock_mhz=1215,
            temperature_c=61.0,
            memory_temperature_c=68.0,
            pcie_gen_current=2,
            pcie_width_current=4,
            pcie_gen_max=2,
            pcie_width_max=4,
            persistence_mode=True,
            fan_speed_pct=None,
            recovery_action=1,
            bar1_total_mib=65536,
            sm_clock_max_mhz=1410,
            memory_clock_max_mhz=1728,
            pcie_replay_count=0,
            utilization_gpu_pct=87,
            utilization_memory_pct=41,
            pcie_tx_kib_s=2048,
            pcie_rx_kib_s=15360,
            processes=(GpuProcess(4242, 55_705, "VLLM::Worker_PP", "docker 3f2a1b0c9d8e"),),
        ),
    )


def test_processes_nvml_lists_without_a_proc_entry_or_memory_keep_none(
    make_backend: Callable[..., NvmlBackend], tmp_path: Path
) -> None:
    fake = make_fake(cards=2)
    fake.cards[0].processes = [(4242, None), (5151, 1024 * 1024 * 300)]  # 5151: another pid ns
    fake.cards[1].processes = []
    backend = make_backend(fake, processes=ProcessNamer(recorded_proc(tmp_path)))

    first, second = backend.snapshot().cards

    assert first.processes == (
        GpuProcess(4242, None, "VLLM::Worker_PP", "docker 3f2a1b0c9d8e"),
        GpuProcess(5151, 300, None, None),
    )
    assert second.processes == ()  # nothing runs: an empty list, not "not supported"


CONTAINER_ID = "3f2a1b0c9d8e" + "b" * 52


@pytest.mark.parametrize(
    ("cgroup", "container"),
    [
        (f"0::/system.slice/docker-{CONTAINER_ID}.scope\n", "docker 3f2a1b0c9d8e"),
        (f"12:memory:/docker/{CONTAINER_ID}\n", "docker 3f2a1b0c9d8e"),
        (f"0::/machine.slice/libpod-{CONTAINER_ID}.scope/container\n", "podman 3f2a1b0c9d8e"),
        (f"0::/kubepods/burstable/pod1/{CONTAINER_ID}\n", "container 3f2a1b0c9d8e"),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("0::/system.slice/fleetd.service\n", None),
    ],
)
def test_a_process_container_is_read_from_its_cgroup(cgroup: str, container: str | None) -> None:
    assert container_of(cgroup) == container


def test_several_cards_keep_their_own_identity(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=3)
    fake.cards[2].clock_event_reasons = 0x80
    fake.cards[1].persistence_enabled = False
    rig = make_backend(fake).snapshot()

    assert [c.pci_bus_id for c in rig.cards] == ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0"]
    assert len({c.uuid for c in rig.cards}) == 3
    assert card(rig.cards, 2).power_brake_unexplained
    assert card(rig.cards, 1).persistence_mode is False
    assert make_backend(fake).device_count() == 3


def test_bytes_from_an_older_module_are_decoded(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = FakeNvml(pynvml, [cmp170hx(0, strings_as_bytes=True)])
    (got,) = make_backend(fake).snapshot().cards
    assert got.uuid == "GPU-6c9d7a8e-1f0b-4b5e-9a55-3f1c2d4e5a00"
    assert got.name == "NVIDIA Graphics Device"
    assert got.serial == "1324021012300"
    assert got.vbios_version == "92.00.6D.00.0A"


# -- not available is not lost ---------------------------------------------------------

UNSUPPORTED_ON_SOME_CARDS = (
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetTotalEnergyConsumption",  # Volta and newer; GA100 has it, say the docs
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetComputeRunningProcesses",
)


def test_not_supported_fields_are_none_and_the_card_is_not_lost(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=1)
    for call in UNSUPPORTED_ON_SOME_CARDS:
        fake.cards[0].errors[call] = pynvml.NVMLError_NotSupported
    (got,) = make_backend(fake).snapshot().cards

    assert not got.lost
    assert got.lost_reason is None
    assert (got.serial, got.vbios_version, got.power_draw_w) == (None, None, None)
    assert (got.power_min_limit_w, got.power_max_limit_w) == (None, None)
    assert (got.clock_event_reasons, got.temperature_c, got.pcie_width_current) == (None,) * 3
    assert (got.persistence_mode, got.memory_temperature_c, got.recovery_action) == (None,) * 3
    assert (got.fan_speed_pct, got.energy_total_mj) == (None, None)
    assert (got.utilization_gpu_pct, got.utilization_memory_pct) == (None, None)
    assert (got.pcie_tx_kib_s, got.pcie_rx_kib_s, got.processes) == (None, None, None)
    # what is supported is still read
    assert (got.power_limit_w, got.memory_total_mib, got.pcie_gen_current) == (180.0, 65536, 2)
    assert got.pci_bus_id == "0000:01:00.0"


@pytest.mark.parametrize(
    "error",
    [pynvml.NVMLError_NotFound, pynvml.NVMLError_NoData, pynvml.NVMLError_FunctionNotFound],
)
def test_other_not_available_errors_give_none(
    make_backend: Callable[..., NvmlBackend], error: type[Exception]
) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].errors["nvmlDeviceGetEnforcedPowerLimit"] = error
    (got,) = make_backend(fake).snapshot().cards
    assert not got.lost
    assert got.power_enforced_limit_w is None
    assert got.power_limit_w == 180.0


def test_fields_the_driver_lacks_are_none(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].memory_temperature_c = None
    fake.cards[0].recovery_action = None
    (got,) = make_backend(fake).snapshot().cards
    assert not got.lost
    assert (got.memory_temperature_c, got.recovery_action) == (None, None)
    assert got.temperature_c == 61.0


def test_an_unexpected_read_error_is_none_and_logged_once(
    make_backend: Callable[..., NvmlBackend], caplog: pytest.LogCaptureFixture
) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].errors["nvmlDeviceGetSerial"] = pynvml.NVMLError_NoPermission
    backend = make_backend(fake)
    with caplog.at_level(logging.WARNING, logger="hwcheck.nvml.cards"):
        first = backend.snapshot().cards[0]
        second = backend.snapshot().cards[0]
    assert not first.lost
    assert not second.lost
    assert first.serial is None
    warnings = [r.getMessage() for r in caplog.records if "nvmlDeviceGetSerial" in r.getMessage()]
    assert warnings == [
        "card 0: NVML call nvmlDeviceGetSerial failed: Insufficient Permissions (NVML error 4)"
    ]


def test_an_older_module_without_clock_event_reasons_uses_throttle_reasons(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = FakeNvml(
        pynvml,
        [cmp170hx(0, clock_event_reasons=0x84)],
        omitted=("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperature"),
    )
    assert not hasattr(fake, "nvmlDeviceGetCurrentClocksEventReasons")
    (got,) = make_backend(fake).snapshot().cards
    assert got.clock_event_reasons == 0x84
    assert got.temperature_c == 61.0
    assert fake.count("nvmlDeviceGetCurrentClocksThrottleReasons", 0) == 1
    assert fake.count("nvmlDeviceGetTemperatureV", 0) == 1


def test_an_older_driver_without_clock_event_reasons_uses_throttle_reasons(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].clock_event_reasons = 0x80
    fake.cards[0].errors["nvmlDeviceGetCurrentClocksEventReasons"] = (
        pynvml.NVMLError_FunctionNotFound
    )
    (got,) = make_backend(fake).snapshot().cards
    assert got.clock_event_reasons == 0x80
    assert fake.count("nvmlDeviceGetCurrentClocksThrottleReasons", 0) == 1


# -- lost cards ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pynvml.NVMLError_GpuIsLost, "GPU is lost (NVML error 15)"),
        (pynvml.NVMLError_ResetRequired, "GPU requires restart (NVML error 16)"),
        (pynvml.NVMLError_Unknown, "Unknown Error (NVML error 999)"),
    ],
)
def test_a_lost_card_is_reported_and_the_others_are_read(
    make_backend: Callable[..., NvmlBackend], error: type[Exception], reason: str
) -> None:
    fake = make_fake(cards=3)
    fake.cards[1].errors["nvmlDeviceGetPowerUsage"] = error

    rig = make_backend(fake).snapshot()

    lost = card(rig.cards, 1)
    assert lost.lost
    assert lost.lost_reason == reason
    # the identity read before the loss is kept
    assert lost.pci_bus_id == "0000:02:00.0"
    assert lost.uuid == "GPU-6c9d7a8e-1f0b-4b5e-9a55-3f1c2d4e5a01"
    assert lost.power_draw_w is None
    # no more calls were made on a lost card
    assert fake.count("nvmlDeviceGetTemperature", 1) == 0
    for healthy in (card(rig.cards, 0), card(rig.cards, 2)):
        assert not healthy.lost
        assert healthy.power_draw_w == 152.345


def test_a_lost_card_keeps_the_identity_of_earlier_snapshots(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    backend = make_backend(fake)
    healthy = card(backend.snapshot().cards, 1)
    fake.cards[1].errors["nvmlDeviceGetHandleByIndex"] = pynvml.NVMLError_GpuIsLost

    lost = card(backend.snapshot().cards, 1)

    assert lost.lost
    assert lost.lost_reason == "GPU is lost (NVML error 15)"
    assert (lost.pci_bus_id, lost.uuid, lost.name, lost.serial) == (
        healthy.pci_bus_id,
        healthy.uuid,
        healthy.name,
        healthy.serial,
    )


def test_a_card_lost_at_first_sight_has_an_empty_identity(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    fake.cards[0].errors["nvmlDeviceGetHandleByIndex"] = pynvml.NVMLError_ResetRequired
    rig = make_backend(fake).snapshot()
    lost = card(rig.cards, 0)
    assert lost.lost
    assert (lost.index, lost.pci_bus_id, lost.uuid, lost.name) == (0, "", "", "")
    assert not card(rig.cards, 1).lost


def test_a_blocked_call_marks_the_card_lost_and_later_calls_are_not_queued_behind_it(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=3)
    gate = threading.Event()
    fake.cards[1].blocks["nvmlDeviceGetPowerUsage"] = gate
    backend = make_backend(fake, call_timeout_s=0.3)
    try:
        started_s = time.monotonic()
        rig = backend.snapshot()
        first_elapsed_s = time.monotonic() - started_s

        stuck = card(rig.cards, 1)
        assert stuck.lost
        assert stuck.lost_reason == "NVML call nvmlDeviceGetPowerUsage timed out after 0.3 s"
        assert stuck.pci_bus_id == "0000:02:00.0"
        # card 2 was read by a fresh worker while card 1's call was still stuck
        assert not card(rig.cards, 2).lost
        assert card(rig.cards, 2).power_draw_w == 152.345
        assert 0.3 <= first_elapsed_s < 3.0

        handles_before = fake.count("nvmlDeviceGetHandleByIndex", 1)
        started_s = time.monotonic()
        again = backend.snapshot()
        assert time.monotonic() - started_s < 0.3  # no second wait on the stuck card
        assert card(again.cards, 1).lost_reason == (
            "NVML call nvmlDeviceGetPowerUsage timed out after 0.3 s and has not returned"
        )
        assert fake.count("nvmlDeviceGetHandleByIndex", 1) == handles_before
        assert not card(again.cards, 0).lost
    finally:
        gate.set()

    wait_until(lambda: not card(backend.snapshot().cards, 1).lost, 5, "card 1 found again")
    assert card(backend.snapshot().cards, 1).power_draw_w == 152.345


def test_too_many_stuck_calls_make_the_backend_unavailable(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    gate = threading.Event()
    fake.cards[0].blocks["nvmlDeviceGetUUID"] = gate
    backend = make_backend(fake, call_timeout_s=0.2, max_stuck_calls=1)
    try:
        with pytest.raises(BackendUnavailable, match="NVML is not answering") as caught:
            backend.snapshot()
        assert "\n" not in str(caught.value)
    finally:
        gate.set()


def test_a_failing_device_count_makes_the_backend_unavailable(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    fake.rig_errors["nvmlDeviceGetCount"] = pynvml.NVMLError_Unknown
    with pytest.raises(
        BackendUnavailable,
        match=r"^NVML call nvmlDeviceGetCount failed: Unknown Error \(NVML error 999\)$",
    ):
        make_backend(fake).snapshot()


# -- power limits ----------------------------------------------------------------------


def test_set_power_limit_sends_milliwatts(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=2)
    backend = make_backend(fake)
    backend.set_power_limit(1, 180)
    backend.set_power_limit(0, 150.5)
    assert fake.limits_set == [(1, 180_000), (0, 150_500)]
    assert card(backend.snapshot().cards, 0).power_limit_w == 150.5


def test_set_power_limit_without_root_says_so(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=2)
    fake.cards[1].errors["nvmlDeviceSetPowerManagementLimit"] = pynvml.NVMLError_NoPermission
    with pytest.raises(PowerLimitError) as caught:
        make_backend(fake).set_power_limit(1, 180)
    assert str(caught.value) == (
        "setting the power limit of card 1 needs root (NVML: no permission); "
        "run fleetctl/fleetd as root"
    )


def test_set_power_limit_out_of_range_names_the_allowed_range(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=1)
    with pytest.raises(PowerLimitError) as caught:
        make_backend(fake).set_power_limit(0, 350)
    assert str(caught.value) == "card 0 refused a power limit of 350 W: it allows 100..300 W"
    assert fake.limits_set == []


def test_set_power_limit_on_a_card_without_power_limits(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].errors["nvmlDeviceSetPowerManagementLimit"] = pynvml.NVMLError_NotSupported
    with pytest.raises(PowerLimitError, match=r"^card 0 does not support power limits$"):
        make_backend(fake).set_power_limit(0, 180)


def test_set_power_limit_on_a_lost_card_raises_card_lost(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    fake.cards[1].errors["nvmlDeviceSetPowerManagementLimit"] = pynvml.NVMLError_GpuIsLost
    with pytest.raises(CardLostError) as caught:
        make_backend(fake).set_power_limit(1, 180)
    assert caught.value.index == 1
    assert str(caught.value) == "card 1 is lost: GPU is lost (NVML error 15)"


def test_set_power_limit_on_a_missing_card(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=2)
    with pytest.raises(PowerLimitError, match=r"^there is no card 7$"):
        make_backend(fake).set_power_limit(7, 180)


@pytest.mark.parametrize("watts", [0, -5, float("nan"), float("inf")])
def test_set_power_limit_rejects_nonsense_watts_before_calling_nvml(
    make_backend: Callable[..., NvmlBackend], watts: float
) -> None:
    fake = make_fake(cards=1)
    with pytest.raises(PowerLimitError, match="positive number of watts"):
        make_backend(fake).set_power_limit(0, watts)
    assert fake.init_calls == 0


# -- starting and stopping the library -------------------------------------------------


@pytest.mark.parametrize(
    ("error", "start", "remedy"),
    [
        (pynvml.NVMLError_DriverNotLoaded, "NVIDIA driver not loaded: ", "sudo modprobe nvidia"),
        (pynvml.NVMLError_LibraryNotFound, "NVML library not found: ", "install the NVIDIA"),
        (
            pynvml.NVMLError_LibRmVersionMismatch,
            "NVIDIA driver/library version mismatch: ",
            "reboot the host",
        ),
        (pynvml.NVMLError_NoPermission, "NVML cannot open the GPUs: ", "run fleetd as root"),
    ],
)
def test_init_failures_are_unavailable_with_one_clear_line(
    make_backend: Callable[..., NvmlBackend], error: type[Exception], start: str, remedy: str
) -> None:
    fake = make_fake(cards=1, init_error=error)
    backend = make_backend(fake)
    with pytest.raises(BackendUnavailable) as caught:
        backend.snapshot()
    message = str(caught.value)
    assert message.startswith(start)
    assert "(NVML error " in message, "NVML's own words are kept"
    assert remedy in caught.value.remedy
    assert "\n" not in message
    with pytest.raises(BackendUnavailable):
        backend.set_power_limit(0, 180)
    assert fake.calls == []  # nothing but nvmlInit was tried


def test_a_missing_module_is_unavailable_with_one_line() -> None:
    asked: list[str] = []

    def no_module(name: str) -> object:
        asked.append(name)
        raise ModuleNotFoundError(f"No module named {name!r}")

    backend = NvmlBackend(import_module=no_module)  # type: ignore[arg-type]
    assert asked == []  # imported lazily, at first use
    with pytest.raises(BackendUnavailable) as caught:
        backend.snapshot()
    assert str(caught.value) == MODULE_MISSING_MESSAGE
    assert asked == ["pynvml"]
    backend.close()


def test_the_module_is_imported_at_first_use(backends: list[NvmlBackend]) -> None:
    fake = make_fake(cards=1)
    backend = NvmlBackend(import_module=lambda name: fake)
    backends.append(backend)
    assert fake.init_calls == 0
    assert len(backend.snapshot().cards) == 1
    assert fake.init_calls == 1


def test_init_happens_once_under_concurrency(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=2)
    fake.init_gate = threading.Event()
    backend = make_backend(fake)
    threads_n = 12
    start = threading.Barrier(threads_n)
    results: list[int] = []
    errors: list[BaseException] = []

    def poll() -> None:
        start.wait()
        try:
            results.append(len(backend.snapshot().cards))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=poll) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    # hold nvmlInit open long enough for every thread to reach it; a second nvmlInit
    # arriving (a missing lock) ends the wait early and fails the assertion below
    wait_until(lambda: fake.init_calls >= 1, 5, "the first nvmlInit")
    holds_within(lambda: fake.init_calls >= 2, timeout_s=0.5)
    fake.init_gate.set()
    for thread in threads:
        thread.join(timeout=10)

    assert errors == []
    assert results == [2] * threads_n
    assert fake.init_calls == 1


def test_close_shuts_down_once(backends: list[NvmlBackend]) -> None:
    fake = make_fake(cards=1)
    backend = NvmlBackend(fake)
    backends.append(backend)
    backend.snapshot()
    backend.close()
    backend.close()
    assert fake.shutdown_calls == 1
    with pytest.raises(BackendUnavailable, match="closed"):
        backend.snapshot()


def test_close_before_use_does_not_touch_nvml() -> None:
    fake = make_fake(cards=1)
    backend = NvmlBackend(fake)
    backend.close()
    assert (fake.init_calls, fake.shutdown_calls) == (0, 0)


def test_constructor_rejects_a_nonsense_timeout() -> None:
    with pytest.raises(ValueError, match="call_timeout_s must be a positive number"):
        NvmlBackend(call_timeout_s=0)


# -- every pynvml name the backend uses exists -----------------------------------------


def names_in_source() -> set[str]:
    """``nvml.X`` and ``getattr(nvml, "X", ...)`` in the gateway's source."""
    tree = ast.parse(GATEWAY_SOURCE.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "nvml"
        ):
            found.add(node.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "nvml"
        ):
            assert isinstance(node.args[1], ast.Constant), "getattr(nvml, ...) needs a literal name"
            found.add(str(node.args[1].value))
    return found


def test_the_declared_names_match_the_source() -> None:
    assert len(set(NVML_NAMES_USED)) == len(NVML_NAMES_USED)
    assert names_in_source() == set(NVML_NAMES_USED)


def test_every_name_used_exists_in_the_installed_pynvml() -> None:
    missing = sorted(
        name for name in names_in_source() | set(NVML_NAMES_USED) if not hasattr(pynvml, name)
    )
    assert missing == []


def test_the_fake_has_every_name_the_backend_uses() -> None:
    fake = make_fake(cards=1)
    assert sorted(name for name in NVML_NAMES_USED if not hasattr(fake, name)) == []
    for name in NVML_NAMES_USED:
        if name.startswith(("NVML_", "NVMLError")):
            assert getattr(fake, name) is getattr(pynvml, name)


# -- the real nvidia-ml-py on this machine ---------------------------------------------

REAL_UNAVAILABLE_STARTS = ("NVML library not found: ", "NVIDIA driver not loaded: ")


def test_the_real_library_reads_or_says_why_not_in_one_line() -> None:
    """Without a GPU this is the real LibraryNotFound path; with one, a real read."""
    backend = NvmlBackend(call_timeout_s=30)
    why_not: str | None = None
    try:
        rig = backend.snapshot()
    except BackendUnavailable as exc:
        why_not = str(exc)
    finally:
        backend.close()
    if why_not is not None:
        assert why_not.startswith(REAL_UNAVAILABLE_STARTS)
        assert "\n" not in why_not
    else:
        assert rig.cards
        assert all(c.uuid.startswith("GPU-") for c in rig.cards)
        assert all(c.memory_total_mib for c in rig.cards)


def test_the_probe_prints_json_or_exits_2_with_one_line() -> None:
    probe = ROOT / "bench" / "nvml_probe.py"
    done = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode == 2:
        assert done.stdout == ""
        assert done.stderr.startswith("nvml_probe: ")
        assert done.stderr.count("\n") == 1
    else:
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["backend"] == "nvml"
        assert len(report["snapshot"]["cards"]) == report["device_count"]
        cards = report["device_count"]
        assert len(report["p2p"]) == cards * (cards - 1) // 2
        assert all("bar1_total_mib" in card for card in report["snapshot"]["cards"])


def test_only_the_gateway_loads_pynvml() -> None:
    """No product module but the gateway imports ``pynvml`` or names it to be imported."""
    root = ROOT
    loaders: list[str] = []
    for package in ("hwcheck", "serving", "recovery", "web", "daemon"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                imported = (
                    [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
                )
                if isinstance(node, ast.ImportFrom) and node.module:
                    imported.append(node.module)
                named = isinstance(node, ast.Constant) and node.value == "pynvml"
                if named or any(name.split(".")[0] == "pynvml" for name in imported):
                    loaders.append(str(path.relative_to(root)))
    assert sorted(set(loaders)) == ["hwcheck/nvml/gateway.py"]
