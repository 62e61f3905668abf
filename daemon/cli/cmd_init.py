"""``fleetctl init``: detect the cards and write a config recording today's baseline.

Later checks then compare against this rig (its card count, memory, PCIe links and power
limits) rather than a guess. An existing file is never overwritten without ``--force``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from daemon.cli.host_baseline import host_table_text, record
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, Output
from daemon.config import DEFAULT_CONFIG_PATH
from hwcheck.atomic import atomic_write
from hwcheck.backend import BackendError
from hwcheck.host import HostSources
from hwcheck.model import RigSnapshot
from hwcheck.sim.scenario import ScenarioError, load_scenario
from hwcheck.sim.state import SimStateError

UNLOCKED_MIN_MIB = 60_000


def baseline_toml(snapshot: RigSnapshot, power_cap_w: float) -> str:
    """The config text: ``[rig]`` with today's baseline, every other key at its default."""
    cards = [c for c in snapshot.cards if not c.lost]
    memories = [c.memory_total_mib for c in cards if c.memory_total_mib is not None]
    memory_mib = min(memories) if memories else 65536
    lines = [
        "# Written by `fleetctl init`: this rig's baseline as detected on "
        f"{snapshot.taken_at.isoformat()}.",
        "# Every other key keeps its default; see the example config for all of them.",
        "",
        "[rig]",
        f"card_count = {len(snapshot.cards)}",
        f"memory_total_mib = {memory_mib}",
        f"power_cap_w = {power_cap_w:.1f}",
    ]
    for card in cards:
        lines.append(
            f"# card {card.index} {card.pci_bus_id} {card.uuid}: {card.memory_total_mib} MiB, "
            f"power limit {card.power_limit_w} W (default {card.power_default_limit_w} W, "
            f"range {card.power_min_limit_w}..{card.power_max_limit_w} W)"
        )
    gens = [c.pcie_gen_max or c.pcie_gen_current for c in cards]
    widths = [c.pcie_width_current or c.pcie_width_max for c in cards]
    if all(gens) and all(widths):
        lines += [
            f"pcie_gen_min = {min(g for g in gens if g)}",
            f"pcie_width_min = {min(w for w in widths if w)}",
        ]
    lines += ["", "[rig.pcie_baseline]"]
    for card, gen, width in zip(cards, gens, widths, strict=True):
        if gen and width:
            lines.append(f'"{card.pci_bus_id}" = {{ gen = {gen}, width = {width} }}')
    if memory_mib < UNLOCKED_MIN_MIB:
        lines.insert(
            0, f"# WARNING: a card reports {memory_mib} MiB: it is locked; fix that first."
        )
    return "\n".join(lines) + "\n"


def write_config(path: Path, text: str) -> None:
    """Write atomically with mode 0640 (configs may later hold webhook secrets)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o640)


def run(out: Output, output: Path, simulate: str | None, power_cap_w: float, force: bool) -> int:
    """Detect, then write ``output`` (refusing to overwrite without ``force``)."""
    if simulate is not None and output == DEFAULT_CONFIG_PATH:
        out.fail(
            f"--simulate writes a simulated rig's baseline: pass --output FILE (not {output})",
            EXIT_BAD_INPUT,
        )
    if output.exists() and not force:
        out.fail(
            f"{output} exists: not overwriting it (use --force, or --output FILE)", EXIT_BAD_INPUT
        )
    host: HostSources
    try:
        if simulate is not None:
            from hwcheck.sim.rig import SimulatedRig

            with tempfile.TemporaryDirectory(prefix="cmpfleet-init-") as state_dir:
                host = SimulatedRig(load_scenario(simulate), Path(state_dir)).host_sources()
                snapshot = host.gpu.snapshot()
                host_baseline = record(host, snapshot)
                host.close()
        else:
            from hwcheck.realhost import real_host_sources

            host = real_host_sources()
            try:
                snapshot = host.gpu.snapshot()
                host_baseline = record(host, snapshot)
            finally:
                host.close()
    except (BackendError, ScenarioError, SimStateError) as exc:
        out.fail(str(exc), EXIT_FAILED)
    if not snapshot.cards:
        out.fail("NVML lists no cards: is the driver loaded? (nvidia-smi)", EXIT_FAILED)
    locked = [
        c.index
        for c in snapshot.cards
        if c.memory_total_mib is not None and c.memory_total_mib < UNLOCKED_MIN_MIB
    ]
    if locked and not force:
        out.fail(
            f"card(s) {', '.join(map(str, locked))} report locked VRAM: unlock them and reboot "
            "before recording a baseline (--force records it anyway)",
            EXIT_FAILED,
        )
    text = baseline_toml(snapshot, power_cap_w)
    if host_baseline is not None:  # the host truth: boot chain, module, bus, P2P
        text += "\n" + host_table_text(host_baseline)
    try:
        write_config(output, text)
    except OSError as exc:
        out.fail(f"cannot write {output}: {exc.strerror}", EXIT_FAILED)
    if out.json_mode:
        out.emit_json({"path": str(output), "cards": len(snapshot.cards), "config": text})
    else:
        out.line(f"wrote {output} for {len(snapshot.cards)} cards")
    return 0
