"""The Xid catalogue: docs/domain.md "Xid catalogue" defaults, 154 by its hex code, overrides."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hwcheck.kernellog.catalogue import (
    XidCatalogue,
    XidOverride,
    overrides_by_xid,
    recovery_action_code,
)
from hwcheck.kernellog.parser import parse_xid
from hwcheck.model import Advice, XidAction, XidClass

APP, HW, DRV, UNK = XidClass.APPLICATION, XidClass.HARDWARE, XidClass.DRIVER, XidClass.UNKNOWN
A = XidAction


@pytest.mark.parametrize(
    ("xid", "xid_class", "action"),
    [
        (13, APP, A.RESTART_ENGINE),
        (31, HW, A.REBOOT),
        (32, HW, A.INSPECT),
        (8, APP, A.RESTART_ENGINE),
        (38, DRV, A.NONE),
        (43, APP, A.NONE),
        (45, APP, A.NONE),
        (48, HW, A.REBOOT),
        (62, HW, A.COLD_POWER_CYCLE),
        (63, HW, A.NONE),
        (92, HW, A.NONE),
        (149, HW, A.INSPECT),
        (64, HW, A.INSPECT),
        (68, APP, A.RESTART_ENGINE),
        (69, APP, A.RESTART_ENGINE),
        (79, HW, A.REBOOT),
        (94, APP, A.RESTART_ENGINE),
        (95, HW, A.REBOOT),
        (109, APP, A.RESTART_ENGINE),
        (119, HW, A.COLD_POWER_CYCLE),
        (120, HW, A.COLD_POWER_CYCLE),
        (140, HW, A.REBOOT),
        (143, HW, A.REBOOT),
    ],
)
def test_defaults(xid: int, xid_class: XidClass, action: XidAction) -> None:
    info = XidCatalogue().info(xid)
    assert (info.xid, info.xid_class, info.action) == (xid, xid_class, action)
    assert info.explanation
    assert "\n" not in info.explanation


def test_xid_31_says_why_it_is_hardware_here() -> None:
    info = XidCatalogue().info(31)
    assert info.xid_class is HW and info.latches
    assert "wedge" in info.explanation
    assert "CMP 170HX" in info.explanation


def test_xid_79_mentions_riser_and_power() -> None:
    explanation = XidCatalogue().info(79).explanation
    assert "riser" in explanation
    assert "power" in explanation


def test_unknown_xid() -> None:
    info = XidCatalogue().info(999)
    assert (info.xid, info.xid_class, info.action) == (999, UNK, A.INSPECT)
    assert "not in cmpfleet's catalogue" in info.explanation
    assert info.headline("card 0") == "Xid 999 (not in cmpfleet's catalogue) on card 0"
    assert not info.latches


def _line_154(code: str, label: str) -> str:
    return (
        "[ 6002.000001] NVRM: Xid (PCI:0000:01:00): 154, pid='<unknown>', name=<unknown>, "
        f"GPU recovery action changed from 0x0 (None) to {code} ({label})"
    )


@pytest.mark.parametrize(
    ("code", "xid_class", "action"),
    [
        ("0x0", DRV, A.NONE),
        ("0x1", HW, A.REBOOT),
        ("0x2", HW, A.REBOOT),
        ("0x3", HW, A.INSPECT),
        ("0x4", HW, A.REBOOT),
        ("0x6", HW, A.REBOOT),
        ("0x7", HW, A.COLD_POWER_CYCLE),
        ("0x5", HW, A.INSPECT),
        ("0x1f", HW, A.INSPECT),
    ],
)
def test_xid_154_is_read_by_its_hex_code(code: str, xid_class: XidClass, action: XidAction) -> None:
    event = parse_xid(_line_154(code, "Whatever The Label Says"))
    assert event is not None
    info = XidCatalogue().classify(event)
    assert (info.xid, info.xid_class, info.action) == (154, xid_class, action)
    assert f"0x{int(code, 16):x}" in info.explanation


def test_xid_154_ignores_the_label() -> None:
    # A label that contradicts the code: the code wins.
    event = parse_xid(_line_154("0x0", "GPU Reset Required"))
    assert event is not None
    assert XidCatalogue().classify(event).action is A.NONE
    event = parse_xid(_line_154("0x1", "None"))
    assert event is not None
    assert XidCatalogue().classify(event).action is A.REBOOT


def test_xid_154_without_a_code() -> None:
    info = XidCatalogue().info(154, "GPU recovery action changed")
    assert (info.xid_class, info.action) == (HW, A.INSPECT)
    assert recovery_action_code("from 0x0 (None) to 0x7 (System Reboot Required)") == 7
    assert recovery_action_code("from 0x1 (GPU Reset Required)") is None


def test_what_latches_follows_the_one_rule_of_xid_info() -> None:
    """A host step advised, or a hardware fault to inspect, latches; nothing else does."""
    catalogue = XidCatalogue()
    assert catalogue.info(79).advice is Advice.WARM_REBOOT
    assert catalogue.info(119).advice is Advice.COLD_POWER_CYCLE
    assert catalogue.info(32).advice is Advice.WARM_REBOOT  # hardware, to inspect
    assert catalogue.info(13).advice is None
    assert catalogue.info(45).advice is None


def test_overrides_replace_only_the_fields_given() -> None:
    catalogue = XidCatalogue(
        {
            31: XidOverride(xid_class=APP, action=A.RESTART_ENGINE),
            79: XidOverride(explanation="our riser on slot 3 is flaky"),
        }
    )
    info_31 = catalogue.info(31)
    assert (info_31.xid_class, info_31.action) == (APP, A.RESTART_ENGINE)
    assert info_31.explanation.endswith("(overridden in the config)")
    info_79 = catalogue.info(79)
    assert (info_79.xid_class, info_79.action, info_79.explanation) == (
        HW,
        A.REBOOT,
        "our riser on slot 3 is flaky",
    )
    assert catalogue.info(13) == XidCatalogue().info(13)


def test_override_applies_to_xid_154_after_the_code() -> None:
    catalogue = XidCatalogue({154: XidOverride(action=A.COLD_POWER_CYCLE)})
    info = catalogue.info(154, "from 0x0 (None) to 0x1 (GPU Reset Required)")
    assert (info.xid_class, info.action) == (HW, A.COLD_POWER_CYCLE)


def _from_config(table: dict[str, dict[str, object]]) -> dict[int, XidOverride]:
    """What the daemon's settings hold for ``[xid.N]`` tables, keyed by Xid number."""
    return overrides_by_xid(
        {key: XidOverride.model_validate(fields) for key, fields in table.items()}
    )


def test_overrides_from_a_config_table() -> None:
    table: dict[str, dict[str, object]] = {
        "31": {"class": "application", "action": "restart_engine"},
        "999": {"class": "hardware", "explanation": " vendor-specific fault on our boards "},
    }
    assert _from_config(table) == {
        31: XidOverride(xid_class=APP, action=A.RESTART_ENGINE),
        999: XidOverride(xid_class=HW, explanation="vendor-specific fault on our boards"),
    }
    catalogue = XidCatalogue(_from_config(table))
    assert catalogue.info(999).xid_class is HW
    assert catalogue.info(999).action is A.INSPECT


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"abc": {"class": "hardware"}}, "xid.abc: not an Xid number"),
        ({"-1": {"class": "hardware"}}, "xid.-1: not an Xid number"),
        (
            {"31": {"class": "hardware"}, "031": {"action": "reboot"}},
            "xid.031: Xid 31 is overridden twice",
        ),
    ],
)
def test_bad_xid_keys_name_the_key(table: dict[str, dict[str, object]], message: str) -> None:
    with pytest.raises(ValueError, match=r".*") as caught:
        _from_config(table)
    assert str(caught.value) == message


CLASSES = "'application', 'hardware', 'driver' or 'unknown'"
ACTIONS = "'none', 'restart_engine', 'reboot', 'cold_power_cycle' or 'inspect'"


@pytest.mark.parametrize(
    ("fields", "key", "message"),
    [
        ({"class": "fatal"}, "class", f"Input should be {CLASSES}"),
        ({"class": 3}, "class", f"Input should be {CLASSES}"),
        ({"action": "rmmod"}, "action", f"Input should be {ACTIONS}"),
        ({"severity": "high"}, "severity", "Extra inputs are not permitted"),
        ({}, "", "Value error, empty override (set class, action or explanation)"),
        ({"explanation": "  "}, "explanation", "Value error, expected one non-empty line of text"),
        (
            {"explanation": "a\nb"},
            "explanation",
            "Value error, expected one non-empty line of text",
        ),
    ],
)
def test_bad_overrides_name_the_field(fields: dict[str, object], key: str, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        XidOverride.model_validate(fields)
    error = caught.value.errors()[0]
    assert ".".join(str(part) for part in error["loc"]) == key
    assert error["msg"] == message
