"""The catalogue against NVIDIA's: every published code, and a reason wherever they differ."""

from __future__ import annotations

import json

import pytest

from hwcheck.kernellog.catalogue import DEFAULT_ENTRIES, XidCatalogue, follows_nvidia
from hwcheck.kernellog.nvidia_catalogue import NVIDIA_XIDS, NvidiaResolution
from hwcheck.model import XidAction, XidClass
from hwcheck.recovery_actions import RECOVERY_ACTION_XID
from tests.support.cli import run_fleetctl_here as fleetctl

CATALOGUE = XidCatalogue()


def test_nvidias_table_is_whole() -> None:
    assert sorted(NVIDIA_XIDS) == list(range(1, 163))
    assert NVIDIA_XIDS[8].resolution is NvidiaResolution.RESTART_APP
    assert NVIDIA_XIDS[149].mnemonic == "NVLINK_NETIR_ERROR"


@pytest.mark.parametrize("xid", sorted(NVIDIA_XIDS))
def test_every_published_code_has_an_entry_with_nvidias_resolution(xid: int) -> None:
    info = CATALOGUE.info(xid, "to 0x1" if xid == RECOVERY_ACTION_XID else "")
    assert "not in cmpfleet's catalogue" not in info.explanation
    assert info.nvidia.endswith(f"{NVIDIA_XIDS[xid].text}")
    if xid == RECOVERY_ACTION_XID:
        return
    follows = follows_nvidia(info.xid_class, info.action, NVIDIA_XIDS[xid].resolution)
    # A departure from NVIDIA always says why on a CMP rig; following it says nothing more.
    assert bool(info.differs) is not follows, (xid, info.action, info.differs)


def test_every_stated_difference_names_its_source() -> None:
    for entry in DEFAULT_ENTRIES:
        if entry.differs:
            assert any(s in entry.differs for s in ("docs/", "(", "AWS", "Kubernetes")), entry.xid


@pytest.mark.parametrize(
    ("xid", "xid_class", "action", "latches"),
    [
        (38, XidClass.DRIVER, XidAction.NONE, False),  # NVIDIA: IGNORE
        (43, XidClass.APPLICATION, XidAction.NONE, False),  # NVIDIA: IGNORE
        (63, XidClass.HARDWARE, XidAction.NONE, False),  # at the next reboot, not a latch
        (92, XidClass.HARDWARE, XidAction.NONE, False),  # NVIDIA: IGNORE
        (31, XidClass.HARDWARE, XidAction.REBOOT, True),  # deliberate, with its reason
    ],
)
def test_reviewed_codes(xid: int, xid_class: XidClass, action: XidAction, latches: bool) -> None:
    info = CATALOGUE.info(xid)
    assert (info.xid_class, info.action, info.latches) == (xid_class, action, latches)


def test_row_remapping_on_a_serving_card_waits_for_the_next_reboot() -> None:
    info = CATALOGUE.info(63)
    assert "next reboot" in info.explanation and info.advice is None


@pytest.mark.parametrize(("xid", "mnemonic"), [(8, "IDLE_TIMEOUT"), (149, "NVLINK_NETIR_ERROR")])
def test_explain_xid_gives_nvidias_resolution_and_cmpfleets_action(xid: int, mnemonic: str) -> None:
    shown = fleetctl("explain", "xid", str(xid))
    assert shown.returncode == 0, shown.stderr
    words = " ".join(shown.stdout.split())
    assert "NVIDIA's resolution:" in words and mnemonic in words
    assert f"cmpfleet: {CATALOGUE.info(xid).action.value}" in words
    document = json.loads(fleetctl("explain", "xid", str(xid), "--json").stdout)
    assert "NVIDIA's resolution:" in document[0]["text"]


def test_explain_shows_the_reason_where_cmpfleet_departs() -> None:
    words = " ".join(fleetctl("explain", "xid", "62").stdout.split())
    assert "which differs; why on a CMP rig:" in words and "cmp170hx-testsuite" in words
