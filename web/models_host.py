"""Response models of the host truth: the status document's ``host`` section and card extras.

Apart from ``web.models`` so that file stays the size of its job; like every response
model they let extra keys through untouched.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Document(BaseModel):
    model_config = ConfigDict(extra="allow")


class BootEntryDocument(_Document):
    """The entry the next reboot boots."""

    kernel: str | None
    title: str | None
    source: str = Field(description="grubby, bls, grub.cfg (or simulated)")
    args: str | None


class P2pPairDocument(_Document):
    """NVML's P2P read status between two cards."""

    a: str
    b: str
    status: Literal[
        "ok",
        "chipset_not_supported",
        "gpu_not_supported",
        "topology_not_supported",
        "disabled_by_regkey",
        "not_supported",
        "unknown",
    ]


class HostFactsDocument(_Document):
    """What was read about the host (null: not readable here)."""

    running_kernel: str | None
    cmdline: str | None
    default_boot: BootEntryDocument | None
    module_path: str | None = Field(description="the nvidia module file modprobe resolves")
    module_srcversion: str | None = Field(description="the loaded module's build")
    registry_dwords: str | None = Field(description="NVreg_RegistryDwords in force")
    p2p: list[P2pPairDocument]


class HostDocument(_Document):
    """The ``host`` section: facts read (once a minute), the baseline judged against."""

    facts: HostFactsDocument | None = Field(description="null until the first read")
    baseline: dict[str, object] | None = Field(
        description="the config's [host] table form; null when nothing is recorded"
    )
    tensor_parallel_size: int = Field(description="the engine's; P2P is critical above 1")


class AerDocument(_Document):
    """A device's PCIe AER counters since boot."""

    correctable: int | None
    nonfatal: int | None
    fatal: int | None
