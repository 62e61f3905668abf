"""The host-truth readers against recorded trees (tests/hwcheck/data/host-*).

``host-plx``: an Ubuntu rig with two cards behind a PLX switch (root port 00:01.1, switch
upstream port 01:00.0, downstream ports 02:08.0 and 02:10.0), GRUB with
``GRUB_DEFAULT=saved``, the patched nvidia module under ``updates/dkms``. ``host-bls``: a
Fedora rig with BLS entries, ``$kernelopts`` in grubenv and grubby's answer. The sysfs
links are made from ``links.txt`` at run time (git keeps no symlinks portably).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hwcheck.hostfacts import bootloader, module, pcitree
from hwcheck.hostfacts.cmdline import missing_args, required_args, split_cmdline
from hwcheck.hostfacts.model import AerCounts, BootEntry, PciLink
from hwcheck.hostfacts.reader import read_host_facts

DATA = Path(__file__).parents[1] / "data"
PATCHED = "6.8.12-cmp-bar1"
STOCK = "6.8.0-49-generic"


@pytest.fixture(scope="module")
def plx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``host-plx`` copied to a temp dir with its sysfs links made."""
    root = tmp_path_factory.mktemp("host") / "host-plx"
    shutil.copytree(DATA / "host-plx", root)
    for line in (root / "links.txt").read_text().splitlines():
        link, _, target = line.partition(" -> ")
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / link)
    return root


# -- kernel command line ------------------------------------------------------------------


def test_proc_cmdline_is_split_as_the_kernel_splits_it(plx: Path) -> None:
    facts = read_host_facts(plx, [])

    assert facts.running_kernel == PATCHED
    assert facts.cmdline is not None
    assert facts.cmdline[:3] == (
        f"BOOT_IMAGE=/boot/vmlinuz-{PATCHED}",
        "root=UUID=3f5e8a1c-5b7d-4e2a-9c1f-0a6b7d8e9f10",
        "ro",
    )
    assert required_args(facts.cmdline) == (
        "pci=realloc,hpmemsize=64G,hpiosize=0",
        "iommu=pt",
        "amd_iommu=on",
        "modprobe.blacklist=nouveau",
        "nvidia.NVreg_EnableResizableBar=1",
    )


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("a b  c\n", ("a", "b", "c")),
        ('dyndbg="file foo.c +p" quiet', ('dyndbg="file foo.c +p"', "quiet")),
        ("", ()),
    ],
)
def test_split_cmdline(text: str, args: tuple[str, ...]) -> None:
    assert split_cmdline(text) == args


def test_missing_args_names_what_stands_instead() -> None:
    present = ("pci=nocrs", "quiet")

    assert missing_args(("pci=realloc", "iommu=pt", "quiet"), present) == [
        ("pci=realloc", "pci=nocrs"),
        ("iommu=pt", None),
    ]


# -- the nvidia module ----------------------------------------------------------------


def test_module_path_srcversion_and_registry_dwords(plx: Path) -> None:
    assert module.module_path(plx, PATCHED) == f"/lib/modules/{PATCHED}/updates/dkms/nvidia.ko.zst"
    assert module.module_srcversion(plx) == "5D1C0A3E9B7F42E6A1C8D2F"
    assert module.registry_dwords(plx) == "RMForceP2PType=1;RMPcieP2PType=2;ForceP2P=17"


def test_missing_module_files_are_unknown(tmp_path: Path) -> None:
    assert module.module_path(tmp_path, PATCHED) is None
    assert module.module_path(tmp_path, None) is None
    assert module.module_srcversion(tmp_path) is None
    assert module.registry_dwords(tmp_path) is None


@pytest.mark.parametrize(
    ("dep", "path"),
    [
        ("kernel/drivers/video/nvidia.ko: \n", "kernel/drivers/video/nvidia.ko"),
        ("updates/dkms/nvidia-uvm.ko.xz: updates/dkms/nvidia.ko.xz\n", None),
        ("extra/nvidia.ko.xz:\nkernel/drivers/video/nvidia.ko:\n", "extra/nvidia.ko.xz"),
    ],
)
def test_modules_dep_gives_the_nvidia_module_only(dep: str, path: str | None) -> None:
    assert module.parse_modules_dep(dep) == path


def test_registry_dwords_set_to_nothing_is_empty_not_unknown() -> None:
    assert module.parse_registry_dwords('EnableMSI: 1\nRegistryDwords: ""\n') == ""
    assert module.parse_registry_dwords("EnableMSI: 1\n") is None


def test_the_same_module_file_under_another_kernel_is_the_same_choice() -> None:
    patched = f"/lib/modules/{PATCHED}/updates/dkms/nvidia.ko"
    assert module.same_module_file(patched, f"/lib/modules/{STOCK}/updates/dkms/nvidia.ko")
    assert not module.same_module_file(patched, f"/lib/modules/{PATCHED}/kernel/nvidia.ko")


# -- the bus ------------------------------------------------------------------------------


def test_a_card_behind_a_plx_switch(plx: Path) -> None:
    card = pcitree.card_bus(plx, "0000:03:00.0")

    assert card.driver == "nvidia"
    assert card.bridges == ("0000:02:08.0", "0000:01:00.0", "0000:00:01.1")
    assert card.bridge == "0000:02:08.0"
    assert card.uplink == PciLink(gen=4, width=16)
    assert pcitree.read_link(plx, "0000:03:00.0") == PciLink(gen=2, width=4)


def test_a_card_bound_to_nouveau_and_one_with_no_driver(plx: Path) -> None:
    assert pcitree.bound_driver(plx, "0000:04:00.0") == "nouveau"
    assert pcitree.bound_driver(plx, "0000:02:08.0") is None


def test_aer_counters_of_cards_and_the_ports_above_them(plx: Path) -> None:
    cards = [pcitree.card_bus(plx, "0000:03:00.0"), pcitree.card_bus(plx, "0000:04:00.0")]

    devices = {d.pci_bus_id: d.counts for d in pcitree.read_aer_counters(plx, cards)}

    assert devices == {
        "0000:03:00.0": AerCounts(0, 0, 0),
        "0000:02:08.0": AerCounts(0, 0, 0),
        "0000:01:00.0": AerCounts(0, 0, 0),
        "0000:04:00.0": AerCounts(12, 1, 1),
        "0000:02:10.0": AerCounts(37, 2, 0),
    }  # the root port has no AER files here: left out, not zero


@pytest.mark.parametrize(
    ("text", "total"),
    [
        ("RxErr 3\nBadTLP 1\nTOTAL_ERR_COR 4\n", 4),
        ("RxErr 3\nBadTLP 1\n", 4),  # an older kernel without the TOTAL line
        ("", None),
    ],
)
def test_aer_file_totals(text: str, total: int | None) -> None:
    assert pcitree.parse_aer_file(text, "TOTAL_ERR_COR") == total


@pytest.mark.parametrize(
    ("speed", "gen"),
    [
        ("2.5 GT/s PCIe", 1),
        ("5.0 GT/s PCIe", 2),
        ("8 GT/s", 3),
        ("16.0 GT/s PCIe", 4),
        ("Unknown", None),
    ],
)
def test_link_speed_to_generation(speed: str, gen: int | None) -> None:
    assert pcitree.parse_link_speed(speed) == gen


def test_a_device_missing_from_sysfs_has_no_topology(tmp_path: Path) -> None:
    card = pcitree.card_bus(tmp_path, "0000:03:00.0")

    assert (card.driver, card.bridges, card.uplink) == (None, (), None)


# -- the bootloader ---------------------------------------------------------------------


def test_grub_saved_entry_picks_the_patched_kernel(plx: Path) -> None:
    entry = bootloader.default_boot_entry(plx)

    assert entry is not None
    assert (entry.kernel, entry.source) == (PATCHED, "grub.cfg")
    assert entry.title == f"Advanced options for Ubuntu>Ubuntu, with Linux {PATCHED}"
    assert entry.args is not None
    assert "iommu=pt" in entry.args
    assert not any(arg.startswith("$") for arg in entry.args)  # $vt_handoff is not set


GRUB_CFG = (DATA / "host-plx" / "boot" / "grub" / "grub.cfg").read_text()


@pytest.mark.parametrize(
    ("selector", "kernel"),
    [
        ("0", STOCK),  # GRUB_DEFAULT=0: the first entry, the newest kernel: the stock one
        ("1>2", PATCHED),
        ("1>1", STOCK),
        ("Advanced options for Ubuntu>Ubuntu, with Linux 6.8.12-cmp-bar1", PATCHED),
        ("gnulinux-6.8.0-49-generic-advanced-3f5e8a1c-5b7d-4e2a-9c1f-0a6b7d8e9f10", STOCK),
        ("Ubuntu", STOCK),
        ("7", None),
        ("2", None),  # the firmware settings entry boots no kernel
    ],
)
def test_grub_cfg_default_selectors(selector: str, kernel: str | None) -> None:
    entries, default = bootloader.parse_grub_cfg(GRUB_CFG)
    entry = bootloader.resolve_grub_default(entries, selector)

    assert default == "${saved_entry}"  # the one-time ${next_entry} is skipped
    found = None if entry is None or entry.linux is None else bootloader.kernel_release(entry.linux)
    assert found == kernel


def test_grub_cfg_with_default_zero_boots_the_stock_kernel(tmp_path: Path) -> None:
    grub = tmp_path / "boot" / "grub"
    grub.mkdir(parents=True)
    (grub / "grub.cfg").write_text(
        GRUB_CFG.replace('set default="${saved_entry}"', 'set default="0"')
    )

    entry = bootloader.default_boot_entry(tmp_path)

    assert entry is not None
    assert (entry.kernel, entry.title) == (STOCK, "Ubuntu")


def test_bls_saved_entry_and_kernelopts() -> None:
    entry = bootloader.default_boot_entry(DATA / "host-bls")

    assert entry == BootEntry(
        kernel="6.12.5-200.cmp.fc41.x86_64",
        args=(
            "root=UUID=a1b2c3d4",
            "ro",
            "rootflags=subvol=root",
            "modprobe.blacklist=nouveau",
            "rhgb",
            "quiet",
            "pci=realloc,hpmemsize=64G",
            "iommu=pt",
        ),
        title="Fedora Linux (6.12.5-200.cmp.fc41.x86_64) 41 (Server Edition)",
        source="bls",
    )


def test_bls_without_saved_entry_boots_the_newest(tmp_path: Path) -> None:
    shutil.copytree(DATA / "host-bls" / "boot", tmp_path / "boot")
    (tmp_path / "boot" / "grub2" / "grubenv").write_text(
        "# GRUB Environment Block\nkernelopts=ro\n"
    )

    entry = bootloader.default_boot_entry(tmp_path)

    assert entry is not None
    assert entry.kernel == "6.12.9-200.fc41.x86_64"  # a package install: the new stock kernel
    assert entry.args == ("ro",)


def test_systemd_boot_loader_conf_default(tmp_path: Path) -> None:
    shutil.copytree(DATA / "host-bls" / "boot" / "loader", tmp_path / "boot" / "loader")
    (tmp_path / "boot" / "loader" / "loader.conf").write_text("timeout 3\ndefault *cmp*\n")

    entry = bootloader.default_boot_entry(tmp_path)

    assert entry is not None
    assert entry.kernel == "6.12.5-200.cmp.fc41.x86_64"


def test_grubby_answer_wins() -> None:
    info = (DATA / "host-bls" / "grubby-info.txt").read_text()

    entry = bootloader.default_boot_entry(DATA / "host-bls", grubby_info=info)

    assert entry is not None
    assert (entry.kernel, entry.source) == ("6.12.5-200.cmp.fc41.x86_64", "grubby")
    assert entry.args is not None
    assert entry.args[-2:] == ("pci=realloc,hpmemsize=64G", "iommu=pt")


def test_no_bootloader_files_is_unknown(tmp_path: Path) -> None:
    assert bootloader.default_boot_entry(tmp_path) is None
    assert bootloader.parse_grubby_info("not grubby output") is None


@pytest.mark.parametrize(
    ("path", "release"),
    [
        ("/boot/vmlinuz-6.8.0-49-generic", "6.8.0-49-generic"),
        ("(hd0,gpt2)/vmlinuz-6.12.5-200.fc41.x86_64", "6.12.5-200.fc41.x86_64"),
        ("/boot/vmlinuz", None),
        ("/EFI/fedora/shimx64.efi", None),
    ],
)
def test_kernel_release_from_an_image_path(path: str, release: str | None) -> None:
    assert bootloader.kernel_release(path) == release


# -- all together -------------------------------------------------------------------------


def test_read_host_facts_puts_every_reader_together(plx: Path) -> None:
    facts = read_host_facts(plx, ["0000:03:00.0", "0000:04:00.0"], p2p=lambda: ())

    assert facts.running_kernel == PATCHED
    assert facts.default_boot is not None
    assert facts.default_boot.kernel == PATCHED
    assert facts.module_path == f"/lib/modules/{PATCHED}/updates/dkms/nvidia.ko.zst"
    assert [c.driver for c in facts.cards] == ["nvidia", "nouveau"]
    assert {d.pci_bus_id for d in facts.aer} >= {"0000:03:00.0", "0000:02:10.0"}
