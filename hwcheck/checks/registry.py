"""The ordered list of checks, running them, and the summaries built from their results.

The order is the order a report lists them in; ids are fixed (docs/reference.md "Checks"). A new
check is one module here and one line below: in ``HARDWARE_CHECKS`` when it judges the
rig's samples and host facts, in ``FLEETD_CHECKS`` when it judges one of fleetd's own
readings (``hwcheck.checks.readings``: add the reading there and have fleetd supply it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from hwcheck.checks import (
    bar1,
    card_count,
    card_lost,
    clocks,
    cuda_probe,
    driver,
    engine_output,
    foreign,
    host_kernel,
    host_resources,
    kernel_cmdline,
    kernel_log,
    memtest,
    nvidia_module,
    nvml,
    p2p,
    pcie_errors,
    pcie_link,
    persistence,
    power_brake,
    power_cap,
    reboot_command,
    store,
    temperature,
    vbios,
    vram,
    xid,
)
from hwcheck.checks.base import Check, CheckInput
from hwcheck.model import CheckResult, Severity, worst_severity


class RegisteredCheck(NamedTuple):
    """A check id and the function that produces its results."""

    id: str
    run: Check


# Checks of the rig itself: every poll and ``fleetctl check`` run them.
HARDWARE_CHECKS: tuple[RegisteredCheck, ...] = (
    RegisteredCheck(nvml.CHECK_ID, nvml.check),
    RegisteredCheck(card_count.CHECK_ID, card_count.check),
    RegisteredCheck(card_lost.CHECK_ID, card_lost.check),
    RegisteredCheck(vram.CHECK_ID, vram.check),
    RegisteredCheck(power_brake.CHECK_ID, power_brake.check),
    RegisteredCheck(power_cap.CHECK_ID, power_cap.check),
    RegisteredCheck(pcie_link.CHECK_ID, pcie_link.check),
    RegisteredCheck(temperature.CHECK_ID, temperature.check),
    RegisteredCheck(xid.CHECK_ID, xid.check),
    RegisteredCheck(cuda_probe.CHECK_ID, cuda_probe.check),
    RegisteredCheck(persistence.CHECK_ID, persistence.check),
    RegisteredCheck(driver.CHECK_ID, driver.check),
    RegisteredCheck(foreign.CHECK_ID, foreign.check),
    # Host truth, judged against the host baseline (no results where it is not read).
    RegisteredCheck(host_kernel.CHECK_ID, host_kernel.check),
    RegisteredCheck(kernel_cmdline.CHECK_ID, kernel_cmdline.check),
    RegisteredCheck(nvidia_module.CHECK_ID, nvidia_module.check),
    RegisteredCheck(bar1.CHECK_ID, bar1.check),
    RegisteredCheck(p2p.CHECK_ID, p2p.check),
    RegisteredCheck(vbios.CHECK_ID, vbios.check),
    RegisteredCheck(clocks.CHECK_ID, clocks.check),
    RegisteredCheck(pcie_errors.CHECK_ID, pcie_errors.check),
    RegisteredCheck(host_resources.CHECK_ID, host_resources.check),
)
# Checks of fleetd's own readings (``CheckInput.readings``): none where the reading is not
# given (``fleetctl check``; ``engine_output`` on a rig without an engine).
FLEETD_CHECKS: tuple[RegisteredCheck, ...] = (
    RegisteredCheck(kernel_log.CHECK_ID, kernel_log.check),
    RegisteredCheck(store.CHECK_ID, store.check),
    RegisteredCheck(engine_output.CHECK_ID, engine_output.check),
    RegisteredCheck(memtest.CHECK_ID, memtest.check),
    RegisteredCheck(reboot_command.CHECK_ID, reboot_command.check),
)
CHECKS: tuple[RegisteredCheck, ...] = HARDWARE_CHECKS + FLEETD_CHECKS
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
