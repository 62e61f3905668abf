"""What each check means on these rigs, and what to do: ``fleetctl explain CHECK_ID``.

A check's result carries one line and one remedy, worded for the card and the moment; the
long text behind them (why it matters on a CMP 170HX rig, what the remedy does, what not
to do) is held here once, per check id, for ``fleetctl explain power_brake`` and for the
status document's ``explanations`` of the checks failing now (``status --verbose``).
docs/domain.md holds the facts these texts rest on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CheckText:
    """One check's explanation: its short name, what it means here, the remedy."""

    title: str
    meaning: str
    remedy: str

    @property
    def text(self) -> str:
        """The meaning and the remedy as one paragraph."""
        return f"{self.meaning} What to do: {self.remedy}"


CHECK_TEXTS: dict[str, CheckText] = {
    "nvml": CheckText(
        "NVML cannot start",
        "fleetd reads every card through NVML (libnvidia-ml). When it cannot start, nothing "
        "about the cards is known: the driver is not loaded, or the library and the kernel "
        "module differ after a driver upgrade without a reboot, or the driver does not answer.",
        "load the module (sudo modprobe nvidia) or reboot after a driver or kernel upgrade; "
        "nvidia-smi says the same thing in its own words.",
    ),
    "card_count": CheckText(
        "cards missing",
        "NVML lists fewer cards than the PCI bus or [rig] card_count: a card fell off the bus "
        "(riser, power) or failed to initialise at boot. A pipeline-parallel engine on the "
        "missing card cannot start.",
        "reboot; if it recurs, reseat the riser and check the card's power cables.",
    ),
    "card_lost": CheckText(
        "card lost",
        "NVML says the GPU is lost, needs a reset, or does not answer at all. On these cards "
        "nvidia-smi -r is not supported, and a driver reload after a fault has turned one "
        "wedged card into four (Xid 154): only a reboot clears it.",
        "fleetctl reboot --confirm (a cold power cycle, --cold, if it comes back); never "
        "rmmod nvidia_uvm.",
    ),
    "vram_unlocked": CheckText(
        "VRAM locked",
        "A CMP 170HX reports 8,192 MiB stock and 65,536 MiB with the unlock module. The unlock "
        "is a kernel module: a kernel or driver change without it relocks the card silently, "
        "and the engine then fails to fit its weights or KV cache.",
        "load the unlock module for the running kernel (rebuild it after a kernel upgrade) "
        "and reboot; a card that alone stays locked: reseat it.",
    ),
    "power_brake": CheckText(
        "HW power brake (PWRBRK#)",
        "Some boards (e.g. ASUS Pro WS WRX80E-SAGE) assert PWRBRK#, PCIe pin B30, on the "
        "slots: every card then runs at about 88 W and 1,140 MHz, a quarter of its "
        "throughput, while nvidia-smi still looks healthy ('HW Power Brake Slowdown: "
        "Active'). It is critical only with no thermal or power-cap cause, held over several "
        "samples; the engine still starts (it is slow, not broken).",
        "first find where the assertion comes from (NVML: from outside the card, 'e.g. by the "
        "system power supply'): every card braked at once, the board's slots or the power "
        "supply; one card, its slot or riser. Then, on a board that drives the pin, Kapton "
        "tape over pin B30 on the card's edge or a riser that does not route B30; taping an "
        "undriven pin gains nothing.",
    ),
    "power_cap": CheckText(
        "power cap off target",
        "The cap (nvidia-smi -pl, about 180 W on these rigs) is lost at every boot and GPU "
        "reset: the cards come back at their 250 W default and run hotter and hungrier. "
        "fleetd re-applies [rig] power_cap_w (or a card's own power_cap_w_by_card) on its own.",
        "fleetctl caps apply (needs root on the rig); a cap outside the card's range "
        "(100..300 W) is a config mistake.",
    ),
    "pcie_link": CheckText(
        "PCIe link degraded",
        "These rigs run Gen2 x4 risers; a link below the card's recorded baseline (Gen1 after "
        "a boot, x1 on a bad riser) slows weight loading and pipeline-parallel traffic. An "
        "idle card may show a lower generation: it is judged against the baseline, never x16.",
        "reseat or replace the riser; a retrain (reboot) often brings Gen1 back to Gen2.",
    ),
    "temperature": CheckText(
        "too hot",
        "Passive cards: the chassis fans must move air over them. Rig owners alert at core "
        "80 C and HBM 85 C; hotter, the card throttles and HBM errors become likelier.",
        "more airflow (fan curve following the hottest card, baffles); check the fans.",
    ),
    "xid_since_boot": CheckText(
        "Xid errors this boot",
        "The driver reported an Xid in the kernel log. On these cards Xid 31 has preceded "
        "wedges and is treated as hardware-class; GSP/PMU faults (62, 119, 120, 154 code 0x7) "
        "need a full power-off. A hardware-class Xid latches the reboot prompt.",
        "the Xid's own step (fleetctl explain xid N): usually fleetctl reboot --confirm.",
    ),
    "cuda_probe": CheckText(
        "CUDA probe failed",
        "After a wedge nvidia-smi still shows the card healthy but cudaSetDevice/cuInit "
        "fails: the probe creates a context and 1 MiB allocation per card to find that before "
        "a 45-minute start fails.",
        "fleetctl reboot --confirm.",
    ),
    "persistence_mode": CheckText(
        "persistence mode off",
        "Without persistence mode the driver tears the cards down between users, and every "
        "NVML read and engine start pays the initialisation again.",
        "nvidia-smi -pm 1 (or enable nvidia-persistenced).",
    ),
    "driver_version": CheckText(
        "driver mismatch",
        "The NVML library and the loaded kernel module differ (an upgrade without a reboot), "
        "or the driver is not the one [rig] driver_version pins.",
        "reboot after a driver upgrade; install the pinned driver.",
    ),
    "foreign_gpu_processes": CheckText(
        "foreign GPU processes",
        "Something other than the engine, fleetd or nvidia-persistenced holds /dev/nvidia*: a "
        "display server, a streaming service, another container. It takes memory, blocks GPU "
        "resets and, on the profile's cards, the engine's start. A holder of a card the "
        "profile in force does not use is shown as information only.",
        "a container: docker|podman stop NAME, or fleetctl start --stop-foreign; Xorg or a "
        "display manager: systemctl stop display-manager (or disable it on a headless rig); "
        "another process: stop it, or allow-list its name in [rig] allowed_gpu_processes.",
    ),
    "kernel_log": CheckText(
        "kernel log unread",
        "fleetd reads Xids from the kernel log (/dev/kmsg); while its follower is down or "
        "records were lost to a ring-buffer overrun, an Xid can go unseen.",
        "fleetd retries on its own; fix the error it names, or restart fleetd; after an "
        "overrun read dmesg | grep -i xid by hand.",
    ),
    "store": CheckText(
        "history not written",
        "fleetd keeps the live picture in memory, but the history (events, samples, the "
        "alert outbox) cannot be written: disk full, or another process holds fleet.db.",
        "free disk space (df -h on the state dir) or stop the process holding fleet.db.",
    ),
    "host_kernel": CheckText(
        "another kernel",
        "The rig booted a kernel other than its baseline. Without the baseline's patches the "
        "64 GB BAR1 (bridge-window patch) and P2P are gone and the unlock module may not "
        "load: an unrelated package install can make a stock kernel the default.",
        "boot the baseline kernel and make it the default again (grubby --set-default, "
        "grub-set-default), hold the kernel packages; or record the new one (fleetctl init).",
    ),
    "kernel_cmdline": CheckText(
        "kernel arguments missing",
        "The baseline's kernel arguments that the driver and PCI setup depend on (pci= bridge "
        "windows, iommu, blacklists, NVreg options) are not on /proc/cmdline.",
        "add them to the boot entry (GRUB_CMDLINE_LINUX and update-grub, or grubby --args) "
        "and reboot.",
    ),
    "driver_module": CheckText(
        "driver module drift",
        "modprobe resolves nvidia to another file than the baseline's (the patched module's "
        "depmod override is gone), the loaded module's build or NVreg_RegistryDwords differ, "
        "or a card is bound to nouveau or no driver.",
        "reinstall the patched module and its depmod override, blacklist nouveau, rebuild "
        "the initramfs, reboot.",
    ),
    "bar1": CheckText(
        "BAR1 lost",
        "Behind PLX switches the 64 GB BAR1 needs the bridge-window patch and its kernel "
        "arguments; without them the cards come up with 256 MiB, and P2P and large transfers "
        "fail in ways that look like an engine hang at NCCL init.",
        "boot the patched kernel with its arguments (host_kernel, kernel_cmdline), reboot.",
    ),
    "p2p": CheckText(
        "P2P lost",
        "A card pair that read peer-to-peer at the baseline no longer does. Pipeline parallel "
        "copes through the host; tensor parallel hangs, so it is critical only there.",
        "boot the patched kernel and driver (host_kernel, driver_module, bar1).",
    ),
    "vbios": CheckText(
        "VBIOS changed",
        "A card's VBIOS differs from the baseline (a flash, a swapped card).",
        "flash the baseline VBIOS back, or record the new one (fleetctl init --force).",
    ),
    "clocks": CheckText(
        "clocks capped",
        "A card's maximum memory or SM clock is below the baseline (1,458 against 1,728 MHz "
        "memory on an old VBIOS: about 16% less bandwidth).",
        "flash the baseline VBIOS, or record the new limits.",
    ),
    "pcie_errors": CheckText(
        "PCIe errors climbing",
        "The card's replay counter or the AER counters of the card or a port above it climb: "
        "a riser or a switch link is marginal. Fatal AER errors precede cards falling off "
        "the bus (Xid 79).",
        "reseat or replace the riser; a port shared by several cards: the switch's own link.",
    ),
    "memtest": CheckText(
        "memory test failed",
        "fleetctl diag memtest wrote and verified patterns on the card and found flipped "
        "bits (or the driver hung): its HBM is faulty, and an engine on it corrupts output.",
        "keep the card out of the profile (gpus) or replace it; test again after a fix.",
    ),
    "reboot_command": CheckText(
        "reboot program missing",
        "[recovery] reboot_command (or power_cycle_command) names a program this host does "
        "not have (systemctl on a host without systemd): fleetd still starts and watches, but "
        "a confirmed reboot cannot run it and is refused with the same words.",
        'set the key to a command this host has (e.g. ["shutdown", "-r", "now"]), then '
        "restart fleetd.",
    ),
    "engine_output": CheckText(
        "engine output wrong",
        "The canaries check what the engine says: mangled identifiers, tool calls leaked as "
        "DSML markup, reasoning in the wrong field, a quarter of the throughput. /health "
        "says 200 through all of these.",
        "the failing canary's advice (fleetctl canary status): the build's kernels or "
        "parser patches, the parser flags, or the power brake for the throughput.",
    ),
    "host_resources": CheckText(
        "disk or memory short",
        "The model's filesystem and the state dir's fill (engine logs, Triton caches, "
        "fleet.db) or the host's RAM is short for the profile (vLLM loads the weights "
        "through host memory; shm for the workers): a start then fails 20 minutes in.",
        "free space on the filesystem named (old checkpoints, caches, logs), or add RAM or "
        "swap; [rig] disk_warn_free_pct and ram tolerance tune it.",
    ),
}
