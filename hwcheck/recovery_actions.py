"""NVML's GPU recovery action codes, judged once: Xid 154's hex code and NVML field 230 alike.

The driver states what a card needs in one code (``nvmlDeviceGpuRecoveryAction_t``, R565+):
NVML field 230 (``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``) holds it, and Xid 154 says it
changed ("... from 0x0 (None) to 0x1 (GPU Reset Required)"; the hex code counts, never the
label). Both are judged by this one table, as an ``XidInfo`` (class, action, why), so the
latch and its advice follow the one rule of ``XidInfo.latches``/``advice`` whichever way
the code arrived: the kernel log's catalogue (``hwcheck.kernellog.catalogue``) and the
recovery policy's card faults both read ``recovery_action_info``.

Adjusted for CMP 170HX rigs (docs/domain.md): 0x0 (none) is the driver saying nothing is
pending. 0x1 (GPU reset) is a reboot here, ``nvidia-smi -r`` being unsupported on these
cards. 0x2 (node reboot) says the OS may be inconsistent, not the GPU's firmware: a warm
reboot first. 0x3 (drain peer-to-peer) latches too: pipeline parallel talks card to card,
so the engine must stop, and a person looks before the reboot. 0x7 (system reboot) is the driver's most severe verdict:
on these rigs the GSP/PMU faults behind it have needed a full power-off. A code this table
does not know is hardware-class, to inspect.
"""

from __future__ import annotations

from collections.abc import Mapping

from hwcheck.model import XidAction, XidClass, XidInfo

# The Xid that reports a recovery action change, with the code in its message.
RECOVERY_ACTION_XID = 154

_HW = XidClass.HARDWARE

# Code -> class, action, and why ("short name: why": the name is the fault's title).
RECOVERY_ACTIONS: Mapping[int, tuple[XidClass, XidAction, str]] = {
    0x0: (XidClass.DRIVER, XidAction.NONE, "none pending: no action needed"),
    0x1: (_HW, XidAction.REBOOT,
          "GPU reset required: nvidia-smi -r is not supported on these cards, so reboot"),
    0x2: (_HW, XidAction.REBOOT, "node reboot required: the OS may be inconsistent; reboot"),
    0x3: (_HW, XidAction.INSPECT, "drain peer-to-peer traffic: inspect the rig"),
    0x4: (_HW, XidAction.REBOOT,
          "drain and reset required: nvidia-smi -r is not supported on these cards, so reboot"),
    0x6: (_HW, XidAction.REBOOT, "PCIe bus reset required: reboot"),
    0x7: (_HW, XidAction.COLD_POWER_CYCLE,
          "system reboot required: on these rigs GSP/PMU faults behind Xid 154 have needed a full "
          "power-off (about 30 s); a warm reboot was not enough"),
}  # fmt: skip


def recovery_action_info(code: int | None) -> XidInfo:
    """The verdict on recovery action ``code`` (``None``: the report carried no code)."""
    if code is None:
        return XidInfo(
            RECOVERY_ACTION_XID,
            _HW,
            XidAction.INSPECT,
            "recovery action without a code: no 'to 0xN' was found in the message; inspect",
        )
    known = RECOVERY_ACTIONS.get(code)
    if known is None:
        return XidInfo(
            RECOVERY_ACTION_XID,
            _HW,
            XidAction.INSPECT,
            f"recovery action 0x{code:x}, an unknown code: inspect",
        )
    xid_class, action, explanation = known
    return XidInfo(
        RECOVERY_ACTION_XID, xid_class, action, f"recovery action 0x{code:x}, {explanation}"
    )


def recovery_action_words(code: int) -> str:
    """What the code asks for, in a few words ("system reboot required")."""
    known = RECOVERY_ACTIONS.get(code)
    if known is None:
        return "an unknown code"
    return known[2].split(": ", 1)[0]
