"""The ordered list of checks, running them, and the summaries built from their results.

The order is the order a report lists them in; ids are fixed (docs/reference.md "Checks"). A new
check is one module here (its ``SPEC``, ``hwcheck.checks.spec``) and its spec in the order
below: in ``HARDWARE_CHECKS`` when it judges the rig's samples and host facts, in
``FLEETD_CHECKS`` when it judges one of fleetd's own readings (``hwcheck.checks.readings``:
add the reading there and have fleetd supply it). Every table keyed by a check id derives
from the specs listed here.
"""

from __future__ import annotations

from collections.abc import Iterable

from hwcheck.checks import (
    bar1,
    card_count,
    card_lost,
    clocks,
    cuda_probe,
    driver_module,
    driver_version,
    engine_output,
    foreign_gpu_processes,
    host_kernel,
    host_resources,
    kernel_cmdline,
    kernel_log,
    memtest,
    nvml,
    p2p,
    pcie_errors,
    pcie_link,
    persistence_mode,
    power_brake,
    power_cap,
    reboot_command,
    store,
    temperature,
    vbios,
    vram_unlocked,
    xid_since_boot,
)
from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import CheckSpec
from hwcheck.model import CheckResult, Severity, worst_severity

# Checks of the rig itself: every poll and ``fleetctl check`` run them.
HARDWARE_CHECKS: tuple[CheckSpec, ...] = (
    nvml.SPEC,
    card_count.SPEC,
    card_lost.SPEC,
    vram_unlocked.SPEC,
    power_brake.SPEC,
    power_cap.SPEC,
    pcie_link.SPEC,
    temperature.SPEC,
    xid_since_boot.SPEC,
    cuda_probe.SPEC,
    persistence_mode.SPEC,
    driver_version.SPEC,
    foreign_gpu_processes.SPEC,
    # Host truth, judged against the host baseline (no results where it is not read).
    host_kernel.SPEC,
    kernel_cmdline.SPEC,
    driver_module.SPEC,
    bar1.SPEC,
    p2p.SPEC,
    vbios.SPEC,
    clocks.SPEC,
    pcie_errors.SPEC,
    host_resources.SPEC,
)
# Checks of fleetd's own readings (``CheckInput.readings``): none where the reading is not
# given (``fleetctl check``; ``engine_output`` on a rig without an engine).
FLEETD_CHECKS: tuple[CheckSpec, ...] = (
    kernel_log.SPEC,
    store.SPEC,
    engine_output.SPEC,
    memtest.SPEC,
    reboot_command.SPEC,
)
CHECKS: tuple[CheckSpec, ...] = HARDWARE_CHECKS + FLEETD_CHECKS
# The hardware checks' ids (every report has them) and fleetd's own beside them.
CHECK_IDS: tuple[str, ...] = tuple(c.id for c in HARDWARE_CHECKS)
FLEETD_CHECK_IDS: tuple[str, ...] = tuple(c.id for c in FLEETD_CHECKS)
KNOWN_CHECK_IDS: frozenset[str] = frozenset(c.id for c in CHECKS)

CARD_STATE_LOST = "lost"


def run_checks(inp: CheckInput) -> list[CheckResult]:
    """Every check's results (ok ones included), in registry order, cards ascending."""
    results: list[CheckResult] = []
    for registered in CHECKS:
        results.extend(registered.run(inp))
    return results


def overall(results: Iterable[CheckResult]) -> Severity:
    """The worst severity of all results (``ok`` for none)."""
    return worst_severity(list(results))


def card_states(results: Iterable[CheckResult]) -> dict[int, str]:
    """``ok|warning|critical|lost`` per card index, for the status document.

    ``lost`` wins over everything; otherwise a card's state is the worst severity of
    its own results (rig-wide results, ``card=None``, are not attributed to a card).
    """
    worst: dict[int, Severity] = {}
    lost: set[int] = set()
    for result in results:
        if result.card is None:
            continue
        if result.id == card_lost.CHECK_ID and result.severity is Severity.CRITICAL:
            lost.add(result.card)
        current = worst.get(result.card, Severity.OK)
        if result.severity.rank > current.rank:
            current = result.severity
        worst[result.card] = current
    return {
        index: CARD_STATE_LOST if index in lost else worst[index].value for index in sorted(worst)
    }
