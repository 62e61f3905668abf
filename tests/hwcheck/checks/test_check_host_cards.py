"""bar1, p2p, vbios, clocks and pcie_errors: table tests, one card of a healthy rig changed.

The values are the issue's: 256 MiB BAR1 on a stock kernel against the patched 64 GiB,
P2P "not supported" after such a boot, an old VBIOS's 1,458 MHz memory clock against
1,728, a riser's replay counter climbing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hwcheck.hostfacts.model import AerCounts, HostFacts, P2pPair, P2pStatus
from hwcheck.model import Severity
from tests.support.cards import bus_id, make_card, make_input, make_rig, result_for
from tests.support.hosts import (
    counters,
    make_baseline,
    make_card_baseline,
    make_host,
    root_port,
    switch_port,
)


def rig_with(card: int = 1, **changes: Any) -> list[Any]:
    """A 4-card poll where card ``card`` has ``changes``."""
    return [make_rig([make_card(i, **(changes if i == card else {})) for i in range(4)])]


@pytest.mark.parametrize(
    ("bar1", "baseline", "severity", "words"),
    [
        pytest.param(65536, 65536, Severity.OK, "BAR1 65,536 MiB", id="patched"),
        pytest.param(256, 65536, Severity.CRITICAL, "the 64 GB BAR1 is gone", id="stock"),
        pytest.param(32768, 65536, Severity.CRITICAL, "BAR1 32,768 MiB, baseline", id="half"),
        pytest.param(256, 256, Severity.OK, "BAR1 256 MiB", id="stock-rig-as-recorded"),
        pytest.param(256, None, Severity.OK, "BAR1 256 MiB", id="no-baseline"),
        pytest.param(None, 65536, Severity.OK, "BAR1 n/a", id="not-reported"),
    ],
)
def test_bar1(bar1: int | None, baseline: int | None, severity: Severity, words: str) -> None:
    recorded = make_baseline(cards={1: make_card_baseline(1, bar1_mib=baseline)})
    inp = make_input(rig_with(bar1_total_mib=bar1), baseline=recorded)

    result = result_for(inp, "bar1", 1)

    assert result.severity is severity, result.message
    assert words in result.message
    assert ("kernel_cmdline" in result.remedy) is (severity is Severity.CRITICAL)


def p2p_host(status: P2pStatus, *pairs: tuple[int, int]) -> HostFacts:
    """The healthy host with ``pairs`` reading ``status``."""
    host = make_host()
    wanted = {tuple(sorted((bus_id(a), bus_id(b)))) for a, b in pairs}
    return replace(
        host, p2p=tuple(P2pPair(p.a, p.b, status) if (p.a, p.b) in wanted else p for p in host.p2p)
    )


@pytest.mark.parametrize(
    ("status", "pairs", "tp", "card_baseline", "severity", "words"),
    [
        pytest.param(P2pStatus.OK, [], 1, {}, Severity.OK, "P2P read OK with 3 peers", id="ok"),
        pytest.param(
            P2pStatus.NOT_SUPPORTED,
            [(1, 0), (1, 2)],
            1,
            {},
            Severity.WARNING,
            "P2P read not supported with 0000:01:00.0, 0000:03:00.0 (OK at the baseline); "
            "pipeline parallel copes",
            id="lost-under-pp",
        ),
        pytest.param(
            P2pStatus.NOT_SUPPORTED,
            [(1, 3)],
            2,
            {},
            Severity.CRITICAL,
            "tensor parallel 2: its start would hang at NCCL init",
            id="lost-under-tp",
        ),
        pytest.param(
            P2pStatus.CHIPSET_NOT_SUPPORTED,
            [(1, 0)],
            1,
            {},
            Severity.WARNING,
            "chipset not supported with 0000:01:00.0",
            id="chipset",
        ),
        pytest.param(
            P2pStatus.UNKNOWN, [(1, 0)], 2, {}, Severity.OK, "P2P read OK", id="unknown-not-judged"
        ),
        pytest.param(
            P2pStatus.NOT_SUPPORTED,
            [(1, 0)],
            2,
            {"p2p_ok": ()},
            Severity.OK,
            "no P2P peers recorded",
            id="never-had-p2p",
        ),
        pytest.param(
            P2pStatus.NOT_SUPPORTED,
            [(1, 0)],
            2,
            {"p2p_ok": None},
            Severity.OK,
            "no P2P baseline",
            id="no-baseline",
        ),
    ],
)
def test_p2p(
    status: P2pStatus,
    pairs: list[tuple[int, int]],
    tp: int,
    card_baseline: dict[str, Any],
    severity: Severity,
    words: str,
) -> None:
    recorded = make_baseline(cards={1: make_card_baseline(1, **card_baseline)})
    inp = make_input(host=p2p_host(status, *pairs), baseline=recorded, tensor_parallel_size=tp)

    result = result_for(inp, "p2p", 1)

    assert result.severity is severity, result.message
    assert words in result.message
    assert bool(result.remedy) is (severity is not Severity.OK)


@pytest.mark.parametrize(
    ("vbios", "memory_max", "severity", "words"),
    [
        pytest.param("92.00.6D.00.0A", 1728, Severity.OK, "VBIOS 92.00.6D.00.0A", id="same"),
        pytest.param(
            "92.00.45.00.03",
            1458,
            Severity.WARNING,
            "VBIOS 92.00.45.00.03, not the baseline 92.00.6D.00.0A; max memory clock 1,458 MHz, "
            "baseline 1,728: about 16% less memory bandwidth",
            id="old-vbios-slower",
        ),
        pytest.param(
            "92.00.6E.00.01",
            1728,
            Severity.WARNING,
            "VBIOS 92.00.6E.00.01, not the baseline 92.00.6D.00.0A",
            id="other-vbios-same-clock",
        ),
        pytest.param(None, 1728, Severity.OK, "VBIOS n/a", id="not-reported"),
    ],
)
def test_vbios(vbios: str | None, memory_max: int, severity: Severity, words: str) -> None:
    inp = make_input(rig_with(vbios_version=vbios, memory_clock_max_mhz=memory_max))

    result = result_for(inp, "vbios", 1)

    assert result.severity is severity, result.message
    assert result.message.endswith(words) or words in result.message
    if severity is Severity.WARNING:
        assert "nvflash" in result.remedy
        assert f'[host.cards."{bus_id(1)}"] vbios = "{vbios}"' in result.remedy


def test_vbios_without_a_clock_change_names_no_cost() -> None:
    inp = make_input(rig_with(vbios_version="92.00.6E.00.01"))

    assert "bandwidth" not in result_for(inp, "vbios", 1).message


@pytest.mark.parametrize(
    ("changes", "severity", "words"),
    [
        pytest.param({}, Severity.OK, "max clocks SM 1,410 MHz, memory 1,728 MHz", id="ok"),
        pytest.param(
            {"memory_clock_max_mhz": 1458},
            Severity.WARNING,
            "max memory clock 1,458 MHz, baseline 1,728: about 16% less memory bandwidth",
            id="old-vbios",
        ),
        pytest.param(
            {"sm_clock_max_mhz": 1140},
            Severity.WARNING,
            "max SM clock 1,140 MHz, baseline 1,410: about 19% less compute",
            id="sm-capped",
        ),
        pytest.param(
            {"memory_clock_max_mhz": 1800}, Severity.OK, "memory 1,800 MHz", id="faster-is-fine"
        ),
        pytest.param({"memory_clock_max_mhz": None}, Severity.OK, "memory n/a", id="not-reported"),
    ],
)
def test_clocks(changes: dict[str, Any], severity: Severity, words: str) -> None:
    inp = make_input(rig_with(**changes))

    result = result_for(inp, "clocks", 1)

    assert result.severity is severity, result.message
    assert words in result.message
    assert ("1,458 MHz" in result.remedy) is (severity is Severity.WARNING)


CARD1 = bus_id(1)
QUIET = AerCounts(0, 0, 0)


@pytest.mark.parametrize(
    ("points", "limit", "severity", "words"),
    [
        pytest.param(
            [(0.0, {1: 10}, {}), (60.0, {1: 10}, {})],
            1.0,
            Severity.OK,
            "no PCIe errors climbing (0 replays since boot)",
            id="quiet",
        ),
        pytest.param(
            [(0.0, {1: 10}, {}), (60.0, {1: 130}, {})],
            1.0,
            Severity.WARNING,
            "PCIe replays +120 in 60 s (120/min, 130 since boot)",
            id="replays-climbing",
        ),
        pytest.param(
            [(0.0, {1: 10}, {}), (60.0, {1: 11}, {})],
            0.5,
            Severity.OK,
            "no PCIe errors",
            id="one-replay-is-noise",
        ),
        pytest.param(
            [(0.0, {1: 10}, {}), (600.0, {1: 14}, {})],
            1.0,
            Severity.OK,
            "no PCIe errors",
            id="below-rate",
        ),
        pytest.param(
            [(0.0, {1: 500}, {}), (60.0, {1: 3}, {})],
            1.0,
            Severity.OK,
            "no PCIe errors",
            id="counter-reset",
        ),
        pytest.param(
            [(0.0, {}, {CARD1: AerCounts(5, 0, 0)}), (60.0, {}, {CARD1: AerCounts(65, 0, 0)})],
            1.0,
            Severity.WARNING,
            "correctable AER errors +60 in 60 s",
            id="card-aer",
        ),
        pytest.param(
            [
                (0.0, {}, {switch_port(1): AerCounts(0, 1, 0)}),
                (60.0, {}, {switch_port(1): AerCounts(0, 9, 0)}),
            ],
            1.0,
            Severity.WARNING,
            f"port {switch_port(1)} above it: non-fatal AER errors +8 in 60 s",
            id="switch-port-aer",
        ),
        pytest.param(
            [(0.0, {}, {root_port(1): QUIET}), (60.0, {}, {root_port(1): AerCounts(0, 0, 1)})],
            1.0,
            Severity.CRITICAL,
            f"port {root_port(1)} above it: 1 fatal AER error since boot",
            id="root-port-fatal",
        ),
        pytest.param(
            [(0.0, {}, {CARD1: AerCounts(0, 0, 2)})],
            1.0,
            Severity.CRITICAL,
            "2 fatal AER errors since boot",
            id="card-fatal-one-sample",
        ),
        pytest.param(
            [(0.0, {1: 0}, {}), (2.0, {1: 8}, {})],
            1.0,
            Severity.WARNING,
            "+8 in 2 s (240/min",
            id="check-window",
        ),
    ],
)
def test_pcie_errors(
    points: list[tuple[float, dict[int, int], dict[str, AerCounts]]],
    limit: float,
    severity: Severity,
    words: str,
) -> None:
    inp = make_input(
        pcie_counters=counters(*points), baseline=make_baseline(pcie_errors_warn_per_min=limit)
    )

    result = result_for(inp, "pcie_errors", 1)

    assert result.severity is severity, result.message
    assert words in result.message
    assert ("riser" in result.remedy) is (severity is not Severity.OK)


def test_a_port_shared_by_two_cards_warns_on_both() -> None:
    port = switch_port(0)  # cards 0 and 1 sit behind it
    points = counters(
        (0.0, {}, {port: AerCounts(0, 0, 0)}), (60.0, {}, {port: AerCounts(30, 0, 0)})
    )
    inp = make_input(pcie_counters=points)

    severities = {card: result_for(inp, "pcie_errors", card).severity for card in range(4)}

    assert severities == {
        0: Severity.WARNING,
        1: Severity.WARNING,
        2: Severity.OK,
        3: Severity.OK,
    }
