"""The simulated host truth: ``[host]`` keys, the built-in scenarios of issue 18, the rig's
own baseline, counters that climb with the simulated uptime, and the simulated memory test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.hostfacts.model import P2pStatus
from hwcheck.memtest.results import MemtestOutcome, MemtestPlan, ignore_progress
from hwcheck.sim.scenario import ScenarioError, load_scenario, parse_scenario
from hwcheck.sim.scenario_hostfacts import SIM_KERNEL
from tests.support.clocks import ManualClock
from tests.support.sim_rigs import RigFactory

HEALTHY = (Path(__file__).parents[2] / "hwcheck" / "sim" / "scenarios" / "healthy.toml").read_text()


def scenario_with(host_toml: str) -> str:
    """healthy.toml with more ``[host]`` keys (appended to its ``[host]`` table)."""
    return HEALTHY + host_toml


def test_a_healthy_host_reads_as_its_own_baseline(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    sources = rig.host_sources()
    assert sources.host_facts is not None
    assert sources.known_good_baseline is not None
    snapshot = sources.gpu.snapshot()

    facts = sources.host_facts(snapshot)
    baseline = sources.known_good_baseline()

    assert facts.running_kernel == baseline.kernel_release == SIM_KERNEL
    assert facts.default_boot is not None
    assert facts.default_boot.kernel == SIM_KERNEL
    assert baseline.required_cmdline == (
        "pci=realloc,hpmemsize=64G",
        "iommu=pt",
        "amd_iommu=on",
        "modprobe.blacklist=nouveau",
    )
    assert {p.status for p in facts.p2p} == {P2pStatus.OK}
    assert len(facts.p2p) == 6
    assert [c.driver for c in facts.cards] == ["nvidia"] * 4
    card = baseline.card("0000:41:00.0")
    assert (card.bar1_mib, card.memory_clock_max_mhz, card.driver) == (65536, 1728, "nvidia")
    assert card.p2p_ok == ("0000:01:00.0", "0000:21:00.0", "0000:61:00.0")


def test_stock_kernel_differs_from_the_baseline_where_the_issue_says(make_rig: RigFactory) -> None:
    sources = make_rig("stock-kernel").host_sources()
    assert sources.host_facts is not None
    assert sources.known_good_baseline is not None
    snapshot = sources.gpu.snapshot()

    facts = sources.host_facts(snapshot)

    assert facts.running_kernel == "6.8.0-49-generic"
    assert sources.known_good_baseline().kernel_release == SIM_KERNEL
    assert {c.bar1_total_mib for c in snapshot.cards} == {256}
    assert {p.status for p in facts.p2p} == {P2pStatus.NOT_SUPPORTED}


def test_boot_drift_changes_only_the_next_boot(make_rig: RigFactory) -> None:
    sources = make_rig("boot-drift").host_sources()
    assert sources.host_facts is not None
    facts = sources.host_facts(sources.gpu.snapshot())

    assert facts.running_kernel == SIM_KERNEL
    assert facts.default_boot is not None
    assert facts.default_boot.kernel == "6.8.0-49-generic"


def test_a_reboot_on_boot_drift_boots_the_default_entry_and_its_trap(
    make_rig: RigFactory,
) -> None:
    """The simulated reboot boots the default entry: the stock kernel, 256 MiB BAR1, no P2P."""
    rig = make_rig("boot-drift")
    rig.reboot()
    sources = rig.host_sources()
    assert sources.host_facts is not None
    snapshot = sources.gpu.snapshot()
    facts = sources.host_facts(snapshot)
    assert facts.running_kernel == "6.8.0-49-generic"
    assert facts.cmdline is not None and facts.cmdline[0] == "BOOT_IMAGE=/vmlinuz-6.8.0-49-generic"
    assert {c.bar1_total_mib for c in snapshot.cards} == {256}
    assert {p.status for p in facts.p2p} == {P2pStatus.NOT_SUPPORTED}
    # A restarted fleetd on the same state dir: still that boot, still that kernel.
    again = make_rig("boot-drift").host_sources()
    assert again.host_facts is not None
    assert again.host_facts(again.gpu.snapshot()).running_kernel == "6.8.0-49-generic"


def test_a_reboot_of_a_healthy_rig_boots_its_baseline_kernel(make_rig: RigFactory) -> None:
    rig = make_rig("healthy")
    rig.reboot()
    sources = rig.host_sources()
    assert sources.host_facts is not None
    snapshot = sources.gpu.snapshot()
    facts = sources.host_facts(snapshot)
    assert facts.running_kernel == SIM_KERNEL
    assert {c.bar1_total_mib for c in snapshot.cards} == {65536}
    assert {p.status for p in facts.p2p} == {P2pStatus.OK}


def test_riser_errors_climb_with_the_simulated_uptime(
    make_rig: RigFactory, clock: ManualClock
) -> None:
    rig = make_rig("riser-errors")
    sources = rig.host_sources()
    assert sources.pcie_aer is not None
    first = sources.gpu.snapshot()
    clock.advance(60)
    second = sources.gpu.snapshot()

    before, after = first.cards[2].pcie_replay_count, second.cards[2].pcie_replay_count
    assert before is not None
    assert after is not None
    assert after - before == 240
    assert second.cards[1].pcie_replay_count == 0
    aer = {d.pci_bus_id: d.counts for d in sources.pcie_aer(second)}
    assert aer["0000:41:00.0"].correctable == 30
    assert aer["0000:00:03.1"].correctable == 60  # the root port above card 2
    assert aer["0000:01:00.0"].correctable == 0


def test_bad_hbm_fails_card_3_in_fixed_blocks_and_card_1_only_under_load(
    make_rig: RigFactory,
) -> None:
    memtester = make_rig("bad-hbm").host_sources().memtester
    assert memtester is not None

    patterns = [memtester.test(card, MemtestPlan(seed=1), ignore_progress) for card in range(4)]
    stress = memtester.test(1, MemtestPlan(patterns=(), stress_s=60, seed=1), ignore_progress)

    assert [r.outcome for r in patterns] == [MemtestOutcome.PASSED] * 3 + [MemtestOutcome.FAILED]
    card3 = patterns[3]
    assert card3.tested_mib == 1  # the simulated memory, reported as what was tested
    assert card3.blocks_failed == 3  # the stuck bit, the alias and the coupling fault
    assert card3.verdict is not None
    assert card3.verdict.startswith("a few fixed blocks: 3 of 16 64 KiB blocks fail")
    assert stress.outcome is MemtestOutcome.FAILED
    assert stress.zero_bursts > 0
    assert stress.verdict is not None
    assert stress.verdict.startswith("errors everywhere under load")
    assert stress.verdict.endswith("return the card")


def test_every_host_key_sets_its_fact(make_rig: RigFactory, tmp_path: Path) -> None:
    text = scenario_with(
        """
kernel_release = "6.9.1-test"
default_boot_kernel = "n/a"
cmdline = "ro quiet"
module_path = "/lib/modules/6.9.1-test/kernel/drivers/video/nvidia.ko"
module_srcversion = "ABC"
registry_dwords = ""
p2p = { "0-1" = "not_supported", "2-3" = "chipset_not_supported" }

[host.cards.1]
driver = "nouveau"
bridges = ["0000:20:08.0", "0000:00:03.1"]
uplink_gen = 4
uplink_width = 16

[host.baseline]
kernel_release = "6.9.1-test"

[host.baseline.cards."0000:01:00.0"]
bar1_mib = 32768
"""
    )
    path = tmp_path / "custom.toml"
    path.write_text(text)
    sources = make_rig(str(path)).host_sources()
    assert sources.host_facts is not None
    assert sources.known_good_baseline is not None
    facts = sources.host_facts(sources.gpu.snapshot())
    baseline = sources.known_good_baseline()

    assert (facts.running_kernel, facts.default_boot, facts.cmdline) == (
        "6.9.1-test",
        None,
        ("ro", "quiet"),
    )
    assert (facts.module_srcversion, facts.registry_dwords) == ("ABC", "")
    assert facts.p2p_status("0000:01:00.0", "0000:21:00.0") is P2pStatus.NOT_SUPPORTED
    assert facts.p2p_status("0000:41:00.0", "0000:61:00.0") is P2pStatus.CHIPSET_NOT_SUPPORTED
    assert facts.p2p_status("0000:01:00.0", "0000:41:00.0") is P2pStatus.OK
    card = facts.card("0000:21:00.0")
    assert card is not None
    assert (card.driver, card.bridge) == ("nouveau", "0000:20:08.0")
    assert card.uplink is not None
    assert (card.uplink.gen, card.uplink.width) == (4, 16)
    assert baseline.kernel_release == "6.9.1-test"
    assert baseline.card("0000:01:00.0").bar1_mib == 32768
    assert baseline.card("0000:21:00.0").bar1_mib == 65536  # the rest stays the healthy self


@pytest.mark.parametrize(
    ("host_toml", "problem"),
    [
        ('kernal_release = "x"\n', "host.kernal_release: unknown key"),
        ("p2p = 3\n", "host.p2p: expected a string, got 3"),
        ('p2p = "maybe"\n', "host.p2p: one of ok, chipset_not_supported"),
        ('p2p = { "0-9" = "ok" }\n', "host.p2p.0-9: card 9 does not exist"),
        (
            'p2p = { "01" = "ok" }\n',
            'host.p2p.01: the key must be a pair of card indexes, e.g. "0-1"',
        ),
        ('\n[host.cards.7]\ndriver = "nvidia"\n', "host.cards.7: card 7 does not exist"),
        ('\n[host.cards.x]\ndriver = "nvidia"\n', "host.cards.x: the key must be a card index"),
        (
            "\n[host.cards.1]\nreplay_per_min = -1\n",
            "host.cards.1.replay_per_min: must not be negative",
        ),
        ('\n[host.cards.1]\nbridges = ["nope"]\n', "host.cards.1.bridges: not a PCI address"),
        ("\n[host.cards.1]\nwires = 1\n", "host.cards.1.wires: unknown key"),
        (
            '\n[host.cards.1]\nmemtest_faults = ["rowhammer"]\n',
            "host.cards.1.memtest_faults: unknown fault model 'rowhammer' (known: stuck-bit,",
        ),
        (
            '\n[host.baseline]\nkernel = "x"\n',
            "host.baseline.kernel: Extra inputs are not permitted",
        ),
        ('kernel_release = "n/a"\n', "host.kernel_release: the running kernel is always known"),
    ],
)
def test_bad_host_keys_fail_in_one_line_naming_the_key(host_toml: str, problem: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(scenario_with(host_toml), "custom.toml", "custom")

    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("scenario custom.toml: ")
    assert problem in message


@pytest.mark.parametrize("name", ["stock-kernel", "boot-drift", "riser-errors", "bad-hbm"])
def test_the_issue_18_scenarios_are_built_in(name: str) -> None:
    scenario = load_scenario(name)

    assert scenario.description
    assert len(scenario.cards) == 4
