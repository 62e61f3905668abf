"""Realistic NVRM message tails for injected Xids, so a simulated line reads like a real one.

The parser and catalogue only need the Xid number, but people read the dashboard and the
events list: a simulated Xid 31 should carry the MMU fault text a real rig prints
(docs/domain.md "Kernel log line formats"), an Xid 154 the recovery-action change, and so on.
"""

from __future__ import annotations

import types
from typing import Final

XID_MESSAGES: Final = types.MappingProxyType(
    {
        13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
        31: (
            "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted "
            "@ 0x7fd7_90743000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
        ),
        32: "Channel ID 00000010 intr 00008000: invalid or corrupted push buffer stream",
        43: "Ch 00000010",
        45: "Ch 00000010",
        48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
        62: "Internal micro-controller halt (PMU)",
        79: "GPU has fallen off the bus.",
        109: "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x3c026",
        119: (
            "Timeout after 45s of waiting for RPC response from GPU0 GSP! "
            "Expected function 76 (GSP_RM_CONTROL) (0x20800a6a 0x4)."
        ),
        120: "GSP Error: Task 1 raised error code 0x5 for reason 0x0 at 0x0 (0 more errors skipped)",
        154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
    }
)


def default_xid_message(xid: int) -> str:
    """The message tail a real driver would print for ``xid`` (a generic one if unknown)."""
    return XID_MESSAGES.get(xid, f"simulated Xid {xid}")
