"""host_kernel, kernel_cmdline and driver_module: table tests over host facts and baselines.

Each row is "a healthy patched host, except": the boot chain or the module as the
issue's 8-card server documents going wrong (a stock kernel booted or made the default,
a kernel argument lost, a stock build winning module resolution, a card bound to nouveau).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hwcheck.hostfacts.model import BootEntry
from hwcheck.model import Severity
from tests.support.cards import make_input, result_for, results_for
from tests.support.hosts import (
    CMDLINE,
    KERNEL,
    MODULE,
    STOCK_KERNEL,
    make_baseline,
    make_card_bus,
    make_host,
)

STOCK_BOOT = BootEntry(STOCK_KERNEL, CMDLINE[1:], f"Ubuntu, with Linux {STOCK_KERNEL}", "grub.cfg")


@pytest.mark.parametrize(
    ("host", "baseline", "severity", "words"),
    [
        pytest.param({}, {}, Severity.OK, f"running kernel {KERNEL}, and the next reboot", id="ok"),
        pytest.param(
            {"running_kernel": STOCK_KERNEL, "default_boot": STOCK_BOOT},
            {},
            Severity.CRITICAL,
            f"running kernel {STOCK_KERNEL}, not the baseline {KERNEL}",
            id="stock-running",
        ),
        pytest.param(
            {"default_boot": STOCK_BOOT},
            {},
            Severity.WARNING,
            f"the next reboot boots {STOCK_KERNEL}",
            id="default-drifted",
        ),
        pytest.param(
            {"default_boot": None}, {}, Severity.OK, "default boot entry is unknown", id="no-boot"
        ),
        pytest.param(
            {"default_boot": BootEntry(None, None)}, {}, Severity.OK, "unknown", id="no-kernel"
        ),
        pytest.param(
            {"running_kernel": STOCK_KERNEL, "default_boot": STOCK_BOOT},
            {"kernel_release": None},
            Severity.OK,
            "no host baseline",
            id="no-baseline",
        ),
        pytest.param({"running_kernel": None}, {}, Severity.OK, "not readable", id="unreadable"),
    ],
)
def test_host_kernel(
    host: dict[str, Any], baseline: dict[str, Any], severity: Severity, words: str
) -> None:
    inp = make_input(host=make_host(**host), baseline=make_baseline(**baseline))

    result = result_for(inp, "host_kernel", None)

    assert result.severity is severity, result.message
    assert words in result.message
    assert bool(result.remedy) is (severity is not Severity.OK)


def test_host_kernel_remedy_names_the_kernel_to_boot() -> None:
    inp = make_input(host=make_host(default_boot=STOCK_BOOT))

    result = result_for(inp, "host_kernel", None)

    assert f"make {KERNEL} the default boot entry again" in result.remedy
    assert f"/boot/vmlinuz-{KERNEL}" in result.remedy


def test_host_checks_report_nothing_where_the_host_is_not_read() -> None:
    inp = make_input(host=None)
    host_ids = {"host_kernel", "kernel_cmdline", "driver_module", "bar1", "p2p", "vbios"}

    assert [r for r in host_ids for r in results_for(inp, r)] == []


WITHOUT_IOMMU = tuple(arg for arg in CMDLINE if arg != "iommu=pt")
NOCRS = tuple("pci=nocrs" if arg.startswith("pci=") else arg for arg in CMDLINE)


@pytest.mark.parametrize(
    ("host", "baseline", "severity", "words"),
    [
        pytest.param({}, {}, Severity.OK, "required kernel arguments present", id="ok"),
        pytest.param(
            {"cmdline": WITHOUT_IOMMU},
            {},
            Severity.CRITICAL,
            "the running kernel lacks iommu=pt",
            id="missing",
        ),
        pytest.param(
            {"cmdline": NOCRS},
            {},
            Severity.CRITICAL,
            "lacks pci=realloc,hpmemsize=64G (has pci=nocrs)",
            id="changed-value",
        ),
        pytest.param(
            {"default_boot": BootEntry(KERNEL, WITHOUT_IOMMU[1:], "Linux", "bls")},
            {},
            Severity.WARNING,
            "the next reboot boots without iommu=pt",
            id="boot-entry-lost-it",
        ),
        pytest.param(
            {"cmdline": WITHOUT_IOMMU},
            {"required_cmdline": None},
            Severity.OK,
            "no required kernel arguments recorded",
            id="no-baseline",
        ),
        pytest.param(
            {"cmdline": ("quiet",)},
            {"required_cmdline": ()},
            Severity.OK,
            "present: none",
            id="nothing-required",
        ),
        pytest.param({"cmdline": None}, {}, Severity.OK, "not readable", id="unreadable"),
    ],
)
def test_kernel_cmdline(
    host: dict[str, Any], baseline: dict[str, Any], severity: Severity, words: str
) -> None:
    inp = make_input(host=make_host(**host), baseline=make_baseline(**baseline))

    result = result_for(inp, "kernel_cmdline", None)

    assert result.severity is severity, result.message
    assert words in result.message
    if severity is not Severity.OK:
        assert "update-grub" in result.remedy
        assert "iommu=pt" in result.remedy or "pci=realloc" in result.remedy


STOCK_MODULE = f"/lib/modules/{KERNEL}/kernel/drivers/video/nvidia.ko"


@pytest.mark.parametrize(
    ("host", "baseline", "severity", "words"),
    [
        pytest.param({}, {}, Severity.OK, f"nvidia module {MODULE}", id="ok"),
        pytest.param(
            {"module_path": STOCK_MODULE},
            {},
            Severity.CRITICAL,
            f"modprobe resolves nvidia to {STOCK_MODULE}",
            id="stock-build-wins",
        ),
        pytest.param(
            {"module_path": f"/lib/modules/{STOCK_KERNEL}/updates/dkms/nvidia.ko"},
            {},
            Severity.OK,
            "updates/dkms/nvidia.ko",
            id="same-file-other-kernel",
        ),
        pytest.param(
            {"module_srcversion": "0000STOCK0000"},
            {},
            Severity.CRITICAL,
            "the loaded nvidia module has srcversion 0000STOCK0000, not the baseline's",
            id="other-build-loaded",
        ),
        pytest.param(
            {"module_srcversion": None},
            {},
            Severity.CRITICAL,
            "no nvidia module is loaded",
            id="no-module-loaded",
        ),
        pytest.param(
            {"registry_dwords": ""},
            {},
            Severity.CRITICAL,
            'NVreg_RegistryDwords is "", the baseline is "RMForceP2PType=1;ForceP2P=17"',
            id="registry-lost",
        ),
        pytest.param(
            {"module_path": STOCK_MODULE, "module_srcversion": "X"},
            {"module_path": None, "module_srcversion": None},
            Severity.OK,
            "srcversion X",
            id="nothing-recorded",
        ),
    ],
)
def test_driver_module_rig_wide(
    host: dict[str, Any], baseline: dict[str, Any], severity: Severity, words: str
) -> None:
    inp = make_input(host=make_host(**host), baseline=make_baseline(**baseline))

    result = result_for(inp, "driver_module", None)

    assert result.severity is severity, result.message
    assert words in result.message
    assert bool(result.remedy) is (severity is not Severity.OK)


@pytest.mark.parametrize(
    ("driver", "severity", "words"),
    [
        pytest.param("nvidia", Severity.OK, "card 2 (0000:03:00.0): nvidia", id="nvidia"),
        pytest.param("nouveau", Severity.CRITICAL, "bound to nouveau, not nvidia", id="nouveau"),
        pytest.param("nova_core", Severity.CRITICAL, "bound to nova_core", id="nova"),
        pytest.param(None, Severity.CRITICAL, "bound to no driver", id="none"),
        pytest.param("vfio-pci", Severity.CRITICAL, "bound to vfio-pci, not nvidia", id="vfio"),
    ],
)
def test_driver_module_per_card_binding(driver: str | None, severity: Severity, words: str) -> None:
    host = make_host()
    cards = tuple(
        make_card_bus(2, driver=driver) if bus.pci_bus_id.endswith("03:00.0") else bus
        for bus in host.cards
    )
    inp = make_input(host=replace(host, cards=cards))

    result = result_for(inp, "driver_module", 2)

    assert result.severity is severity, result.message
    assert words in result.message
    if driver in ("nouveau", "nova_core", None):
        assert "blacklist nouveau" in result.remedy


def test_a_card_nvml_does_not_list_bound_to_nouveau_is_named_rig_wide() -> None:
    host = make_host(count=4)
    host = replace(host, cards=(*host.cards, make_card_bus(4, driver="nouveau")))
    inp = make_input(host=host)

    result = result_for(inp, "driver_module", None)

    assert result.severity is Severity.CRITICAL
    assert "0000:05:00.0 is bound to nouveau" in result.message
    assert "blacklist nouveau" in result.remedy
