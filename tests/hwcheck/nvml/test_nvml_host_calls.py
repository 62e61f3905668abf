"""The host-truth NVML calls (BAR1, max clocks, replay counter, P2P) against the fake pynvml.

The fake raises the real ``pynvml.NVMLError_*`` classes and hands back the real ctypes
structures (``c_nvmlBAR1Memory_t``), so a wrong constant or class fails here. "Not
supported" is a value: the field is None or the pair reads ``not_supported``, never a
crash, and a stuck call is bounded by the gateway's time limit like every other call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pynvml
import pytest

from hwcheck.hostfacts.model import P2pPair, P2pStatus
from hwcheck.nvml.backend import NvmlBackend
from tests.support.fake_pynvml import MIB, FakeNvml, cmp170hx


def make_fake(cards: int = 1, **kwargs: object) -> FakeNvml:
    return FakeNvml(pynvml, [cmp170hx(slot) for slot in range(cards)], **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def make_backend() -> Iterator[Callable[..., NvmlBackend]]:
    made: list[NvmlBackend] = []

    def make(fake: FakeNvml, **kwargs: object) -> NvmlBackend:
        backend = NvmlBackend(fake, **kwargs)  # type: ignore[arg-type]
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def test_bar1_max_clocks_and_replay_counter_are_read_in_their_units(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    fake.cards[1].bar1_total_bytes = 256 * MIB  # stock kernel: no 64 GB BAR1
    fake.cards[1].memory_clock_max_mhz = 1458  # old VBIOS
    fake.cards[1].pcie_replay_count = 4711

    first, second = make_backend(fake).snapshot().cards

    assert (first.bar1_total_mib, first.sm_clock_max_mhz, first.memory_clock_max_mhz) == (
        65536,
        1410,
        1728,
    )
    assert first.pcie_replay_count == 0
    assert (second.bar1_total_mib, second.memory_clock_max_mhz) == (256, 1458)
    assert second.pcie_replay_count == 4711


@pytest.mark.parametrize(
    "call",
    ["nvmlDeviceGetBAR1MemoryInfo", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetPcieReplayCounter"],
)
@pytest.mark.parametrize(
    "error", [pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound]
)
def test_not_supported_is_none_and_the_card_stays(
    make_backend: Callable[..., NvmlBackend], call: str, error: type[Exception]
) -> None:
    fake = make_fake(cards=1)
    fake.cards[0].errors[call] = error

    (card,) = make_backend(fake).snapshot().cards

    assert not card.lost
    values = {
        "nvmlDeviceGetBAR1MemoryInfo": (card.bar1_total_mib,),
        "nvmlDeviceGetMaxClockInfo": (card.sm_clock_max_mhz, card.memory_clock_max_mhz),
        "nvmlDeviceGetPcieReplayCounter": (card.pcie_replay_count,),
    }[call]
    assert set(values) == {None}
    assert card.memory_total_mib == 65536


def test_row_remapping_is_read_where_the_card_reports_it(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    """A100-class cards report remapped rows; a CMP 170HX answers NotSupported (no ECC)."""
    fake = make_fake(cards=3)
    fake.cards[0].remapped_rows = (3, 1, 1, 0)
    fake.cards[1].remapped_rows = (0, 0, 0, 1)
    fake.cards[2].errors["nvmlDeviceGetRemappedRows"] = pynvml.NVMLError_FunctionNotFound

    first, second, third = make_backend(fake).snapshot().cards

    assert (first.remapped_rows_correctable, first.remapped_rows_uncorrectable) == (3, 1)
    assert (first.row_remap_pending, first.row_remap_failed) == (True, False)
    assert (second.row_remap_pending, second.row_remap_failed) == (False, True)
    for card in (third, *make_backend(make_fake(cards=1)).snapshot().cards):
        assert not card.lost
        assert card.remapped_rows_correctable is None and card.row_remap_failed is None


def test_a_lost_card_during_the_new_calls_is_lost(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    fake.cards[0].errors["nvmlDeviceGetBAR1MemoryInfo"] = pynvml.NVMLError_GpuIsLost

    first, second = make_backend(fake).snapshot().cards

    assert first.lost
    assert first.lost_reason is not None
    assert "GPU is lost" in first.lost_reason
    assert not second.lost


def test_p2p_status_of_every_pair_in_address_order(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=3)
    fake.p2p_pairs[frozenset({0, 2})] = pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
    backend = make_backend(fake)

    pairs = backend.p2p_status(backend.snapshot())

    assert pairs == (
        P2pPair("0000:01:00.0", "0000:02:00.0", P2pStatus.OK),
        P2pPair("0000:01:00.0", "0000:03:00.0", P2pStatus.CHIPSET_NOT_SUPPORTED),
        P2pPair("0000:02:00.0", "0000:03:00.0", P2pStatus.OK),
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (pynvml.NVML_P2P_STATUS_OK, P2pStatus.OK),
        (pynvml.NVML_P2P_STATUS_NOT_SUPPORTED, P2pStatus.NOT_SUPPORTED),
        (pynvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED, P2pStatus.GPU_NOT_SUPPORTED),
        (pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED, P2pStatus.TOPOLOGY_NOT_SUPPORTED),
        (pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY, P2pStatus.DISABLED_BY_REGKEY),
        (pynvml.NVML_P2P_STATUS_UNKNOWN, P2pStatus.UNKNOWN),
    ],
)
def test_every_p2p_status_code_is_a_word(
    make_backend: Callable[..., NvmlBackend], code: int, status: P2pStatus
) -> None:
    backend = make_backend(make_fake(cards=2, p2p_status=code))

    (pair,) = backend.p2p_status(backend.snapshot())

    assert pair.status is status


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (pynvml.NVMLError_NotSupported, P2pStatus.NOT_SUPPORTED),
        (pynvml.NVMLError_FunctionNotFound, P2pStatus.NOT_SUPPORTED),
        (pynvml.NVMLError_GpuIsLost, P2pStatus.UNKNOWN),
        (pynvml.NVMLError_Unknown, P2pStatus.UNKNOWN),
    ],
)
def test_a_failing_p2p_call_is_a_status_not_a_crash(
    make_backend: Callable[..., NvmlBackend], error: type[Exception], status: P2pStatus
) -> None:
    fake = make_fake(cards=2)
    backend = make_backend(fake)
    snapshot = backend.snapshot()
    fake.cards[0].errors["nvmlDeviceGetP2PStatus"] = error

    (pair,) = backend.p2p_status(snapshot)

    assert pair.status is status


def test_lost_cards_are_left_out_of_the_pairs(make_backend: Callable[..., NvmlBackend]) -> None:
    fake = make_fake(cards=3)
    fake.cards[1].errors["nvmlDeviceGetUUID"] = pynvml.NVMLError_GpuIsLost
    backend = make_backend(fake)

    pairs = backend.p2p_status(backend.snapshot())

    assert [(p.a, p.b) for p in pairs] == [("0000:01:00.0", "0000:03:00.0")]


def test_a_stuck_p2p_call_is_bounded_by_the_call_timeout(
    make_backend: Callable[..., NvmlBackend],
) -> None:
    fake = make_fake(cards=2)
    backend = make_backend(fake, call_timeout_s=0.3)
    snapshot = backend.snapshot()
    gate = threading.Event()
    fake.cards[0].blocks["nvmlDeviceGetP2PStatus"] = gate
    try:
        started_s = time.monotonic()
        (pair,) = backend.p2p_status(snapshot)
        assert time.monotonic() - started_s < 5
        assert pair.status is P2pStatus.UNKNOWN
    finally:
        gate.set()
