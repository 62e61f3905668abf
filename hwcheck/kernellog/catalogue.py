"""The Xid catalogue: who is to blame for an Xid and what cmpfleet advises doing about it.

Every code of NVIDIA's published Xid catalogue has an entry (``nvidia_catalogue.py`` holds
NVIDIA's table: mnemonic and resolution bucket). Where cmpfleet has no CMP-specific
finding it follows NVIDIA's resolution (``_FOLLOWS``): restart the application is restart
the engine, reset the GPU is a reboot (``nvidia-smi -r`` is not supported on CMP 170HX),
no action is none, contact support is inspect. Where it departs from NVIDIA, the entry
says why for a CMP rig and where that comes from (``_Entry.differs``), shown by ``fleetctl
explain xid N`` and in docs/domain.md "Xid catalogue"; a test holds that every departure
has its reason. Xid 154 is judged by its recovery action code, in the table NVML's field
230 shares. Each explanation is written "short name: why": the name before the first
": " is the fault's title in headlines (``XidInfo.title``). A rig owner overrides entries
per Xid in the config (``[xid.31] class = "application"``): ``XidOverride`` is that table's
one declaration and validation, and ``overrides_by_xid`` keys the tables by Xid number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hwcheck.kernellog.nvidia_catalogue import NVIDIA_XIDS, NvidiaResolution, plain_name
from hwcheck.model import XidAction, XidClass, XidEvent, XidInfo
from hwcheck.recovery_actions import RECOVERY_ACTION_XID, recovery_action_info

_APP = XidClass.APPLICATION
_HW = XidClass.HARDWARE
_DRV = XidClass.DRIVER
_UNK = XidClass.UNKNOWN
_R = NvidiaResolution

# Xid 154 carries the driver's new recovery action as "... to 0x1 (GPU Reset Required)";
# its code is judged by the one recovery-action table (``hwcheck.recovery_actions``).
_RECOVERY_CODE_RE = re.compile(r"\bto\s+0x(?P<code>[0-9a-fA-F]{1,8})\b")

# What cmpfleet does when it follows NVIDIA's resolution bucket: (class, action).
_FOLLOWS: Mapping[NvidiaResolution, tuple[XidClass, XidAction]] = MappingProxyType(
    {
        _R.RESTART_APP: (_APP, XidAction.RESTART_ENGINE),
        _R.RESET_GPU: (_HW, XidAction.REBOOT),  # nvidia-smi -r: "Not Supported" on CMP 170HX
        _R.RESTART_BM: (_HW, XidAction.REBOOT),
        _R.RESTART_VM: (_HW, XidAction.REBOOT),
        _R.IGNORE: (_DRV, XidAction.NONE),
        _R.CONTACT_SUPPORT: (_UNK, XidAction.INSPECT),
        _R.CHECK_MECHANICALS: (_HW, XidAction.INSPECT),
        _R.UPDATE_SWFW: (_DRV, XidAction.INSPECT),
        _R.CHECK_UVM: (_DRV, XidAction.INSPECT),
        _R.WORKFLOW_XID_45: (_APP, XidAction.NONE),
        _R.WORKFLOW_XID_48: (_HW, XidAction.REBOOT),
        _R.WORKFLOW_NVLINK_ERR: (_HW, XidAction.INSPECT),
        _R.WORKFLOW_NVLINK5_ERR: (_HW, XidAction.INSPECT),
    }
)

_WEDGES = (
    "on CMP 170HX rigs an Xid 31 has preceded wedges: the card then returns "
    "cudaErrorDevicesUnavailable while nvidia-smi looks normal, and reloading nvidia_uvm after "
    "one gave Xid 154 on all four cards (tim-odonnell/cmp170hx-deepseek-v4-flash CAMPAIGN-LOG "
    '2026-09-29; docs/domain.md "Wedges and what must never be done"), so the engine is held for a reboot'
)
_POWER_OFF = (
    "GSP/PMU faults on CMP 170HX have needed a full power-off for about 30 s; a warm reboot "
    'was not enough (dev-boz/cmp170hx-testsuite README; docs/domain.md "Wedges and what must never be done")'
)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One catalogue row: cmpfleet's verdict, and why it departs from NVIDIA's (if it does)."""

    xid: int
    xid_class: XidClass
    action: XidAction
    explanation: str
    differs: str = ""


_CMP_ENTRIES: tuple[_Entry, ...] = (
    _Entry(8, _APP, XidAction.RESTART_ENGINE,
           "GPU stopped processing (idle timeout): the application's channel timed out; restart it"),
    _Entry(13, _APP, XidAction.RESTART_ENGINE,
           "graphics engine exception: usually the application (bad kernel or memory access); the GPU is healthy"),
    _Entry(31, _HW, XidAction.REBOOT,
           "MMU page fault: NVIDIA calls it an application error, but on CMP 170HX rigs it precedes "
           "wedges (cudaErrorDevicesUnavailable, Xid 154 after a uvm reload), so cmpfleet treats it "
           "as hardware and advises a reboot",
           _WEDGES),
    _Entry(32, _HW, XidAction.INSPECT,
           "invalid or corrupted push buffer stream: PCIe link quality; inspect the riser, cable and slot",
           "these rigs run their cards on risers, and a corrupted push buffer stream there points "
           "at the PCIe link (PCIe replay and AER counters climbing on the card; "
           "docs/domain.md \"PCIe links\"), which restarting the engine does not fix"),
    _Entry(38, _DRV, XidAction.NONE,
           "driver firmware error (FECS watchdog timeout): NVIDIA asks no action; an engine it "
           "killed is restarted by the supervisor; if it repeats, update the driver"),
    _Entry(43, _APP, XidAction.NONE,
           "GPU stopped processing: the application's channel hit a fault and was reset; the GPU is "
           "healthy and NVIDIA asks no action (an engine that died of it is restarted anyway)"),
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
           "power the rig off for about 30 s",
           _POWER_OFF),
    _Entry(63, _HW, XidAction.NONE,
           "ECC page retirement or row remapping recorded: it takes effect at the next reboot, at the "
           "owner's convenience; the card keeps serving (NVIDIA: a pending remapping does not affect "
           "other work). Watch for 64 or 48"),
    _Entry(64, _HW, XidAction.INSPECT,
           "ECC page retirement or row remapping failed: the card may be failing; inspect and consider replacing it",
           "a failed remapping means the card has no spare row left for the fault: a reset does not "
           "bring one back, and NVIDIA's RMA policy for row-remapping failures applies "
           "(docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt); the engine is held for an inspection"),
    _Entry(68, _APP, XidAction.RESTART_ENGINE,
           "video decoder (NVDEC) exception: usually the application"),
    _Entry(69, _APP, XidAction.RESTART_ENGINE,
           "graphics engine class error: usually the application"),
    _Entry(74, _HW, XidAction.REBOOT,
           "NVLink error: CMP 170HX cards have no NVLink bridge in these rigs, so this points at the "
           "board or driver; reboot and inspect if it repeats [AWS node agent: critical]",
           "these rigs have no NVLink bridge, so NVIDIA's NVLink workflow has no link to check: "
           "the report points at the board or driver, and AWS's GPU node agent treats 74 as "
           "critical; reboot"),
    _Entry(79, _HW, XidAction.REBOOT,
           "GPU has fallen off the bus: reboot, then check the riser, PCIe power cables and PSU"),
    _Entry(92, _HW, XidAction.NONE,
           "high single-bit ECC error rate: corrected errors; NVIDIA asks no action; watch for 63, "
           "64 or 48 that would follow a degrading memory"),
    _Entry(94, _APP, XidAction.RESTART_ENGINE,
           "contained memory error: only the application using that memory was affected; restart it"),
    _Entry(95, _HW, XidAction.REBOOT,
           "uncontained memory error: every application on the GPU is affected; the GPU needs a reset (a reboot)"),
    _Entry(109, _APP, XidAction.RESTART_ENGINE,
           "context switch timeout: usually the application; if it repeats on a healthy engine, suspect the card",
           "Kubernetes' NVIDIA device plugin counts 109 among the application errors it skips "
           "(k8s-device-plugin internal/rm/health.go); cmpfleet restarts the engine first and the "
           "card is suspected only when it repeats"),
    _Entry(110, _HW, XidAction.REBOOT,
           "security fault error: the GPU needs a reset (a reboot) [AWS node agent: critical]"),
    _Entry(119, _HW, XidAction.COLD_POWER_CYCLE,
           "GSP RPC timeout: on these cards a warm reboot was not enough; power the rig off for about 30 s",
           _POWER_OFF),
    _Entry(120, _HW, XidAction.COLD_POWER_CYCLE,
           "GSP error: on these cards a warm reboot was not enough; power the rig off for about 30 s",
           _POWER_OFF),
    _Entry(140, _HW, XidAction.REBOOT,
           "unrecovered ECC error escaped containment: the GPU needs a reset (a reboot)"),
    _Entry(142, _HW, XidAction.INSPECT,
           "video encoder 3 exception: unexpected on these cards; inspect [AWS node agent: critical]",
           "AWS's GPU node agent treats 142 as critical, so cmpfleet holds the engine for an "
           "inspection instead of only reporting it"),
    _Entry(143, _HW, XidAction.REBOOT,
           "GPU initialisation failure: reboot; if it repeats, check the card, riser and power"),
    *(
        _Entry(xid, _HW, XidAction.INSPECT,
               f"{plain_name(NVIDIA_XIDS[xid])}: an NVLink5 error, but CMP 170HX cards have no NVLink "
               "in these rigs; inspect the card and the driver")
        for xid in range(144, 151)
    ),
)  # fmt: skip


def _followed(xid: int) -> _Entry:
    """The entry for a code cmpfleet has no CMP-specific finding for: NVIDIA's resolution."""
    row = NVIDIA_XIDS[xid]
    xid_class, action = _FOLLOWS[row.resolution]
    reset = " (a GPU reset is a reboot on these cards)" if action is XidAction.REBOOT else ""
    return _Entry(
        xid,
        xid_class,
        action,
        f"{plain_name(row)}: no CMP-specific finding; cmpfleet follows NVIDIA's catalogue: "
        f"{row.text}{reset}",
    )


def _default_entries() -> tuple[_Entry, ...]:
    """Every code of NVIDIA's catalogue (154 aside), cmpfleet's own entries first."""
    own = {entry.xid: entry for entry in _CMP_ENTRIES}
    codes = sorted((set(NVIDIA_XIDS) | set(own)) - {RECOVERY_ACTION_XID})
    return tuple(own.get(xid) or _followed(xid) for xid in codes)


DEFAULT_ENTRIES: tuple[_Entry, ...] = _default_entries()


def follows_nvidia(xid_class: XidClass, action: XidAction, resolution: NvidiaResolution) -> bool:
    """True when cmpfleet's verdict is what following NVIDIA's ``resolution`` means here.

    The same action, and the same answer to "does it hold the engine" (a hardware class
    with an inspection latches where an unknown one only warns).
    """
    followed = _FOLLOWS.get(resolution)
    if followed is None or followed[1] is not action:
        return False
    ours = XidInfo(0, xid_class, action, "")
    return ours.latches == XidInfo(0, followed[0], followed[1], "").latches


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
        """The class, action and explanation for ``xid`` (``message`` matters for 154).

        ``nvidia`` is NVIDIA's resolution for the code; ``differs`` says why cmpfleet's
        action departs from it on a CMP rig (empty when it follows NVIDIA).
        """
        row = NVIDIA_XIDS.get(xid)
        nvidia = f"{row.mnemonic or f'Xid {xid}'}: {row.text}" if row is not None else ""
        differs = ""
        if xid == RECOVERY_ACTION_XID:
            base = recovery_action_info(recovery_action_code(message))
            if base.action is XidAction.COLD_POWER_CYCLE:
                differs = _POWER_OFF
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
                differs = entry.differs
        override = self._overrides.get(xid)
        if override is not None:
            base = XidInfo(
                xid,
                base.xid_class if override.xid_class is None else override.xid_class,
                base.action if override.action is None else override.action,
                override.explanation or f"{base.explanation} (overridden in the config)",
            )
            if override.action is not None or override.xid_class is not None:
                differs = "set by this rig's config ([xid.N] override)"
        return XidInfo(base.xid, base.xid_class, base.action, base.explanation, nvidia, differs)

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
        if not text.isdecimal() or len(text) > 10:
            raise ValueError(f"xid.{key}: not an Xid number")
        xid = int(text)
        if xid in overrides:
            raise ValueError(f"xid.{key}: Xid {xid} is overridden twice")
        overrides[xid] = override
    return overrides
