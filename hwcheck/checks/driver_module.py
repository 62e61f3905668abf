"""``driver_module``: the patched nvidia module is the one loaded, and it drives every card.

A rig runs a patched driver module installed under a depmod override, with its
``NVreg_RegistryDwords``. A stock build of the same driver version can win module
resolution after an unrelated install (same version string: ``driver_version`` sees
nothing), and the stock driver's P2P path "reports success" and moves zero bytes. So the
module file modprobe resolves, the loaded build's ``srcversion`` and its registry options
are compared with the baseline (critical on a difference), and a card bound to nouveau,
nova or to no driver at all is critical: NVML and the engine cannot use it.
"""

from __future__ import annotations

from hwcheck.checks import card_count, driver_version, p2p, vram_unlocked
from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.hostfacts.model import HostFacts
from hwcheck.hostfacts.module import same_module_file
from hwcheck.model import CheckResult, Severity

CHECK_ID = "driver_module"
WRONG_DRIVERS = frozenset({"nouveau", "nova", "nova_core", "nova-core"})
REMEDY_BUILD = (
    "reinstall the patched nvidia module and its depmod override (/etc/depmod.d), run "
    "depmod -a, rebuild the initramfs and reboot; if the new build is meant, record it "
    "(fleetctl init --force, or pin [host] module_path / module_srcversion)"
)
REMEDY_BINDING = (
    "blacklist nouveau and nova (modprobe.blacklist=nouveau,nova_core on the kernel line and "
    "in /etc/modprobe.d), rebuild the initramfs and reboot"
)


def _bad_binding(driver: str | None, expected: str | None) -> bool:
    return driver is None or driver in WRONG_DRIVERS or bool(expected and driver != expected)


def _module_problems(inp: CheckInput, host: HostFacts) -> list[str]:
    base = inp.baseline
    problems: list[str] = []
    nvml_cards = {card.pci_bus_id for card in inp.now.cards}
    for bus in host.cards:  # cards on the bus that NVML does not list: named here
        if bus.pci_bus_id not in nvml_cards and _bad_binding(
            bus.driver, base.card(bus.pci_bus_id).driver
        ):
            problems.append(f"{bus.pci_bus_id} is bound to {bus.driver or 'no driver'}")
    if (
        base.module_path is not None
        and host.module_path is not None
        and not same_module_file(host.module_path, base.module_path)
    ):
        problems.append(
            f"modprobe resolves nvidia to {host.module_path}, not the baseline {base.module_path}"
        )
    if base.module_srcversion is not None and host.module_srcversion != base.module_srcversion:
        problems.append(
            f"no nvidia module is loaded (the baseline build has srcversion {base.module_srcversion})"
            if host.module_srcversion is None
            else f"the loaded nvidia module has srcversion {host.module_srcversion}, not the "
            f"baseline's {base.module_srcversion}: another build of the driver"
        )
    if base.registry_dwords is not None and host.registry_dwords not in (
        None,
        base.registry_dwords,
    ):
        problems.append(
            f'NVreg_RegistryDwords is "{host.registry_dwords}", the baseline is '
            f'"{base.registry_dwords}"'
        )
    return problems


def _rig_result(inp: CheckInput, host: HostFacts) -> CheckResult:
    problems = _module_problems(inp, host)
    if problems:
        remedy = REMEDY_BINDING if all(" is bound to " in p for p in problems) else REMEDY_BUILD
        if any(p.startswith("NVreg") for p in problems):
            remedy = (
                "restore options nvidia NVreg_RegistryDwords=... in /etc/modprobe.d as recorded, "
                f"rebuild the initramfs and reboot; {REMEDY_BUILD}"
            )
        return CheckResult(CHECK_ID, None, Severity.CRITICAL, "; ".join(problems), remedy)
    if not inp.baseline.recorded:
        return CheckResult(CHECK_ID, None, Severity.OK, "no host baseline recorded")
    where = host.module_path or "unknown file"
    build = host.module_srcversion or "unknown build"
    return CheckResult(CHECK_ID, None, Severity.OK, f"nvidia module {where} (srcversion {build})")


def _card_results(inp: CheckInput, host: HostFacts) -> list[CheckResult]:
    results: list[CheckResult] = []
    for card in inp.live_cards():
        bus = host.card(card.pci_bus_id)
        if bus is None:
            continue
        label = f"card {card.index} ({card.pci_bus_id})"
        expected = inp.baseline.card(card.pci_bus_id).driver
        driver = bus.driver
        if _bad_binding(driver, expected):
            bound = "no driver" if driver is None else driver
            want = expected or "nvidia"
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{label} is bound to {bound}, not {want}",
                    REMEDY_BINDING if driver in WRONG_DRIVERS or driver is None else REMEDY_BUILD,
                )
            )
        else:
            results.append(CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: {driver}"))
    return results


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result (the module) and one per card (its binding)."""
    if inp.host is None:
        return []
    return [_rig_result(inp, inp.host), *_card_results(inp, inp.host)]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "driver module drift",
        "modprobe resolves nvidia to another file than the baseline's (the patched module's "
        "depmod override is gone), the loaded module's build or NVreg_RegistryDwords differ, "
        "or a card is bound to nouveau or no driver.",
        "reinstall the patched module and its depmod override, blacklist nouveau, rebuild "
        "the initramfs, reboot.",
    ),
    alert=Alert("DriverModuleDrift", "Not the baseline nvidia module"),
    tag="DRIVER",
    explains=frozenset(
        {card_count.CHECK_ID, driver_version.CHECK_ID, p2p.CHECK_ID, vram_unlocked.CHECK_ID}
    ),
    gate=True,
    host_panel=True,
    drawn_at=DrawnAt.HOST_MODULE,
)
