"""The Xid catalogue: who is to blame for an Xid and what cmpfleet advises doing about it.

The defaults follow NVIDIA's Xid catalogue (Ampere and later) adjusted for CMP 170HX rigs
(docs/domain.md "Xid catalogue"): ``nvidia-smi -r`` is not supported on these cards, so
"reset the GPU" becomes a reboot; GSP/PMU faults (62, 119, 120, some 154s) have needed a
full power-off; Xid 154 is judged by its recovery action code, in the table NVML's field
230 shares; Xid 31 has preceded wedges, so it is hardware-class here although NVIDIA calls
it an application error. Each explanation is written "short name: why": the name before
the first ": " is the fault's title in headlines (``XidInfo.title``). The table is data; a
rig owner overrides entries per Xid in the config
(``[xid.31] class = "application"``): ``XidOverride`` is that table's one declaration and
validation, and ``overrides_by_xid`` keys the tables by Xid number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hwcheck.model import XidAction, XidClass, XidEvent, XidInfo
from hwcheck.recovery_actions import RECOVERY_ACTION_XID, recovery_action_info

_APP = XidClass.APPLICATION
_HW = XidClass.HARDWARE
_DRV = XidClass.DRIVER

# Xid 154 carries the driver's new recovery action as "... to 0x1 (GPU Reset Required)";
# its code is judged by the one recovery-action table (``hwcheck.recovery_actions``).
_RECOVERY_CODE_RE = re.compile(r"\bto\s+0x(?P<code>[0-9a-fA-F]{1,8})\b")


@dataclass(frozen=True, slots=True)
class _Entry:
    """One catalogue row."""

    xid: int
    xid_class: XidClass
    action: XidAction
    explanation: str


DEFAULT_ENTRIES: tuple[_Entry, ...] = (
    _Entry(13, _APP, XidAction.RESTART_ENGINE,
           "graphics engine exception: usually the application (bad kernel or memory access); the GPU is healthy"),
    _Entry(31, _HW, XidAction.REBOOT,
           "MMU page fault: NVIDIA calls it an application error, but on CMP 170HX rigs it precedes "
           "wedges (cudaErrorDevicesUnavailable, Xid 154 after a uvm reload), so cmpfleet treats it "
           "as hardware and advises a reboot"),
    _Entry(32, _HW, XidAction.INSPECT,
           "invalid or corrupted push buffer stream: PCIe link quality; inspect the riser, cable and slot"),
    _Entry(38, _DRV, XidAction.REBOOT,
           "driver firmware error: the driver needs a GPU reset, which is a reboot on these cards"),
    _Entry(43, _APP, XidAction.RESTART_ENGINE,
           "GPU stopped processing: the application hit a fault; the GPU is healthy"),
    _Entry(45, _APP, XidAction.NONE,
           "preemptive cleanup: follows another Xid or a killed process; act on that one"),
    _Entry(46, _HW, XidAction.REBOOT,
           "GPU stopped processing (driver error): unlike 43, NVIDIA advises a GPU reset, a reboot "
           "on these cards [NVIDIA health-validation Xid checks; AWS node agent: critical]"),
    _Entry(48, _HW, XidAction.REBOOT,
           "double-bit ECC error: uncorrectable memory error; reboot, and replace the card if it repeats"),
    _Entry(54, _HW, XidAction.INSPECT,
           "auxiliary power is not connected: check the card's PCIe power cables and the PSU"),
    _Entry(62, _HW, XidAction.COLD_POWER_CYCLE,
           "internal micro-controller (PMU/GSP) halt: on these cards a warm reboot was not enough; "
           "power the rig off for about 30 s"),
    _Entry(63, _HW, XidAction.REBOOT,
           "ECC page retirement or row remapping recorded: it takes effect at the next GPU reset (a reboot)"),
    _Entry(64, _HW, XidAction.INSPECT,
           "ECC page retirement or row remapping failed: the card may be failing; inspect and consider replacing it"),
    _Entry(68, _APP, XidAction.RESTART_ENGINE,
           "video decoder (NVDEC) exception: usually the application"),
    _Entry(69, _APP, XidAction.RESTART_ENGINE,
           "graphics engine class error: usually the application"),
    _Entry(74, _HW, XidAction.REBOOT,
           "NVLink error: CMP 170HX cards have no NVLink bridge in these rigs, so this points at the "
           "board or driver; reboot and inspect if it repeats [AWS node agent: critical]"),
    _Entry(79, _HW, XidAction.REBOOT,
           "GPU has fallen off the bus: reboot, then check the riser, PCIe power cables and PSU"),
    _Entry(92, _HW, XidAction.INSPECT,
           "high single-bit ECC error rate: the card's memory is degrading; inspect"),
    _Entry(94, _APP, XidAction.RESTART_ENGINE,
           "contained memory error: only the application using that memory was affected; restart it"),
    _Entry(95, _HW, XidAction.REBOOT,
           "uncontained memory error: every application on the GPU is affected; the GPU needs a reset (a reboot)"),
    _Entry(109, _APP, XidAction.RESTART_ENGINE,
           "context switch timeout: usually the application; if it repeats on a healthy engine, suspect the card"),
    _Entry(110, _HW, XidAction.REBOOT,
           "security fault error: the GPU needs a reset (a reboot) [AWS node agent: critical]"),
    _Entry(119, _HW, XidAction.COLD_POWER_CYCLE,
           "GSP RPC timeout: on these cards a warm reboot was not enough; power the rig off for about 30 s"),
    _Entry(120, _HW, XidAction.COLD_POWER_CYCLE,
           "GSP error: on these cards a warm reboot was not enough; power the rig off for about 30 s"),
    _Entry(140, _HW, XidAction.REBOOT,
           "unrecovered ECC error escaped containment: the GPU needs a reset (a reboot)"),
    _Entry(143, _HW, XidAction.REBOOT,
           "GPU initialisation failure: reboot; if it repeats, check the card, riser and power"),
    *(
        _Entry(xid, _HW, XidAction.REBOOT,
               f"critical for AWS's GPU node agent: AWS treats Xid {xid} as critical; cmpfleet "
               "has no CMP-specific finding for it: reboot, and look it up in NVIDIA's Xid catalogue if it repeats")
        for xid in (136, 142, 151, 155, 156, 158)
    ),
)  # fmt: skip


class XidOverride(BaseModel):
    """A rig owner's change to one Xid's entry (``[xid.N]``); ``None`` keeps the default field.

    In the config the class is spelt ``class`` (a Python keyword, hence ``xid_class``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    xid_class: XidClass | None = Field(default=None, validation_alias="class")
    action: XidAction | None = None
    explanation: str | None = None

    @field_validator("explanation")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip() or "\n" in value:
            raise ValueError("expected one non-empty line of text")
        return value.strip()

    @model_validator(mode="after")
    def _not_empty(self) -> XidOverride:
        if self.xid_class is None and self.action is None and self.explanation is None:
            raise ValueError("empty override (set class, action or explanation)")
        return self


def recovery_action_code(message: str) -> int | None:
    """The hex code after ``to`` in an Xid 154 message (not the label); ``None`` if absent."""
    match = _RECOVERY_CODE_RE.search(message)
    if match is None:
        return None
    return int(match.group("code"), 16)


class XidCatalogue:
    """Looks Xids up in the default table with the rig owner's overrides applied."""

    def __init__(self, overrides: Mapping[int, XidOverride] | None = None) -> None:
        self._entries = {entry.xid: entry for entry in DEFAULT_ENTRIES}
        self._overrides = dict(overrides or {})

    def info(self, xid: int, message: str = "") -> XidInfo:
        """The class, action and explanation for ``xid`` (``message`` matters for 154)."""
        if xid == RECOVERY_ACTION_XID:
            base = recovery_action_info(recovery_action_code(message))
        else:
            entry = self._entries.get(xid)
            if entry is None:
                base = XidInfo(
                    xid,
                    XidClass.UNKNOWN,
                    XidAction.INSPECT,
                    "not in cmpfleet's catalogue: look it up in NVIDIA's Xid catalogue",
                )
            else:
                base = XidInfo(xid, entry.xid_class, entry.action, entry.explanation)
        override = self._overrides.get(xid)
        if override is None:
            return base
        return XidInfo(
            xid,
            base.xid_class if override.xid_class is None else override.xid_class,
            base.action if override.action is None else override.action,
            override.explanation or f"{base.explanation} (overridden in the config)",
        )

    def classify(self, event: XidEvent) -> XidInfo:
        """The verdict on one parsed Xid event."""
        return self.info(event.xid, event.message)


def overrides_by_xid(table: Mapping[str, XidOverride]) -> dict[int, XidOverride]:
    """The config's ``[xid.N]`` tables keyed by Xid number.

    Raises ValueError with one line naming the bad key.
    """
    overrides: dict[int, XidOverride] = {}
    for key, override in table.items():
        text = str(key).strip()
        if not text.isdigit() or len(text) > 10:
            raise ValueError(f"xid.{key}: not an Xid number")
        xid = int(text)
        if xid in overrides:
            raise ValueError(f"xid.{key}: Xid {xid} is overridden twice")
        overrides[xid] = override
    return overrides
