"""``fleetctl init``: detect the cards and record today's baseline in the rig's config.

Later checks then compare against this rig (its card count, memory, PCIe links and power
limits) rather than a guess. The baseline is written *into* the config (the documented
example when there is none yet): every comment, key and line that is not a baseline key is
kept (``daemon.cli.setup.config_edit``), and the change is shown as a diff. An existing config
is changed only with ``--force``, and then only its baseline keys.
"""

from __future__ import annotations

import difflib
import math
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, Output
from daemon.cli.setup.config_edit import ConfigEditError, TableUpdate, apply_updates
from daemon.cli.setup.host_baseline import host_baseline_updates
from daemon.cli.setup.init_reboot import with_host_reboot_command
from daemon.config import DEFAULT_CONFIG_PATH
from daemon.install.installer import example_config
from hwcheck.atomic import NotARegularFile, atomic_write, writable_target
from hwcheck.backend import BackendError
from hwcheck.host import HostSources
from hwcheck.model import RigProfile, RigSnapshot
from hwcheck.regular_file import read_regular
from hwcheck.sim.scenario import ScenarioError, load_scenario
from hwcheck.sim.state import SimStateError

UNLOCKED_MIN_MIB = 60_000
CONFIG_MODE = 0o640
# The cap a config without one gets (the CMP 170HX's usual 180 W); never over the file's.
DEFAULT_POWER_CAP_W = 180.0
WARNING_PREFIX = "# WARNING: a card reports "


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def card_caps(caps: Sequence[str]) -> dict[str, float]:
    """``--card-power-cap-w 0-3=180`` options as ``[rig.power_cap_w_by_card]`` keys.

    Checked as fleetd reads them (``RigProfile``): a card index, a run or a PCI address,
    50 to 400 W; ``ValueError`` with one line naming the option.
    """
    found: dict[str, float] = {}
    for text in caps:
        card, sep, watts = text.partition("=")
        if not sep or not card.strip() or not _is_number(watts):
            raise ValueError(f"--card-power-cap-w {text!r}: expected CARD=WATTS, e.g. 0-3=180")
        found[card.strip()] = float(watts)
    try:
        checked = RigProfile(power_cap_w_by_card=found).power_cap_w_by_card
    except ValidationError as exc:
        error = exc.errors()[0]
        card = ".".join(str(part) for part in error["loc"][1:])
        problem = error["msg"].removeprefix("Value error, ")
        raise ValueError(f"--card-power-cap-w {card or ''}: {problem}".replace(" :", ":")) from None
    return dict(checked)


def card_baseline(
    snapshot: RigSnapshot,
    power_cap_w: float | None,
    card_caps_w: Mapping[str, float] | None = None,
) -> list[TableUpdate]:
    """What init records about the cards: ``[rig]`` keys and ``[rig.pcie_baseline]``.

    ``power_cap_w`` is not measured: it is written only when given (``None``: left as is).

    ``card_caps_w``: per-card caps to write into ``[rig.power_cap_w_by_card]`` beside the
    ones already there (a card's own cap is never dropped by a run without them).
    """
    cards = [c for c in snapshot.cards if not c.lost]
    memories = [c.memory_total_mib for c in cards if c.memory_total_mib is not None]
    rig: dict[str, object] = {
        "card_count": len(snapshot.cards),
        "memory_total_mib": min(memories) if memories else 65536,
    }
    if power_cap_w is not None:
        rig["power_cap_w"] = round(float(power_cap_w), 1)
    gens = [c.pcie_gen_max or c.pcie_gen_current for c in cards]
    widths = [c.pcie_width_current or c.pcie_width_max for c in cards]
    if cards and all(gens) and all(widths):
        rig["pcie_gen_min"] = min(g for g in gens if g)
        rig["pcie_width_min"] = min(w for w in widths if w)
    links: dict[str, object] = {}
    notes: dict[str, str] = {}
    for card, gen, width in zip(cards, gens, widths, strict=True):
        if gen and width:
            links[card.pci_bus_id] = {"gen": gen, "width": width}
            notes[card.pci_bus_id] = (
                f"card {card.index} {card.uuid}: {card.memory_total_mib} MiB, power limit "
                f"{card.power_limit_w} W (default {card.power_default_limit_w} W, range "
                f"{card.power_min_limit_w}..{card.power_max_limit_w} W)"
            )
    stamp = f"recorded by fleetctl init on {snapshot.taken_at.isoformat(timespec='seconds')}"
    updates = [
        TableUpdate(("rig",), rig, comments={"card_count": stamp}),
        TableUpdate(("rig", "pcie_baseline"), links, replace=True, comments=notes),
    ]
    if card_caps_w:
        updates.append(TableUpdate(("rig", "power_cap_w_by_card"), dict(card_caps_w)))
    return updates


def with_warning(text: str, memory_mib: int | None) -> str:
    """``text`` led by the locked-card warning when one is recorded (and without it else)."""
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith(WARNING_PREFIX):
        lines = lines[1:]
    if memory_mib is not None and memory_mib < UNLOCKED_MIN_MIB:
        lines.insert(0, f"{WARNING_PREFIX}{memory_mib} MiB: it is locked; fix that first.\n")
    return "".join(lines)


def baseline_text(current: str, updates: list[TableUpdate]) -> str:
    """``current`` (a config's text) with the baseline written in, nothing else changed."""
    edited = apply_updates(current, updates)
    rig = next((u.values for u in updates if u.path == ("rig",)), {})
    memory = rig.get("memory_total_mib")
    return with_warning(edited, memory if isinstance(memory, int) else None)


def write_config(path: Path, text: str) -> Path:
    """Write atomically (``hwcheck.atomic``): a new file 0640 (it may later hold secrets).

    An existing one keeps its mode and owner (a 0600 config holding secrets stays 0600);
    a symbolic link is written through (the file it names changes); a device, FIFO,
    socket or directory is refused and left as it was. The file written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, text, mode=CONFIG_MODE, keep_mode=True)


def cap_to_record(flag_w: float | None, current: str) -> float | None:
    """The ``power_cap_w`` init writes: the flag when given; else none over the file's own.

    A config without one gets the default cap (the cards' 180 W); a cap in the file is
    the operator's choice and a default never overwrites it.
    """
    if flag_w is not None:
        return flag_w
    try:
        rig = tomllib.loads(current).get("rig")
    except tomllib.TOMLDecodeError:
        return None  # the edit itself says what is wrong with the file
    has_cap = isinstance(rig, dict) and "power_cap_w" in rig
    return None if has_cap else DEFAULT_POWER_CAP_W


def _diff(before: str, after: str, before_name: str, after_name: str) -> list[str]:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name
    )
    return [line.rstrip("\n") for line in lines]


def run(
    out: Output,
    output: Path,
    simulate: str | None,
    power_cap_w: float | None,
    force: bool,
    card_caps_w: Sequence[str] = (),
) -> int:
    """Detect, then write the baseline into ``output`` (an existing one only with ``force``).

    ``card_caps_w``: ``CARD=WATTS`` per-card caps (``--card-power-cap-w``).
    """
    try:
        per_card = card_caps(card_caps_w)
    except ValueError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    if simulate is not None and output == DEFAULT_CONFIG_PATH:
        out.fail(
            f"--simulate writes a simulated rig's baseline: pass --output FILE (not {output})",
            EXIT_BAD_INPUT,
        )
    host: HostSources
    try:
        if simulate is not None:
            from hwcheck.sim.rig import SimulatedRig

            with tempfile.TemporaryDirectory(prefix="cmpfleet-init-") as state_dir:
                host = SimulatedRig(load_scenario(simulate), Path(state_dir)).host_sources()
                snapshot = host.gpu.snapshot()
                host_updates = host_baseline_updates(host, snapshot)
                host.close()
        else:
            from hwcheck.realhost import real_host_sources

            host = real_host_sources()
            try:
                snapshot = host.gpu.snapshot()
                host_updates = host_baseline_updates(host, snapshot)
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
    try:
        # Only a regular file (or a link to one) is read and written: a device, a FIFO or
        # a directory at --output is refused before anything, and left as it was.
        _target, existing = writable_target(output)
        exists = existing is not None
        # A new config names a reboot program this host has (an existing one is left alone).
        current = (
            read_regular(output).decode("utf-8")
            if exists
            else with_host_reboot_command(example_config())
        )
        # The host's baseline (boot chain, module, bus, P2P) beside the cards'.
        updates = (
            card_baseline(snapshot, cap_to_record(power_cap_w, current), per_card) + host_updates
        )
        text = baseline_text(current, updates)
    except NotARegularFile as exc:
        out.fail(f"not writing {output}: it is {exc.strerror}", EXIT_FAILED)
    except OSError as exc:
        out.fail(f"cannot read {output}: {exc.strerror}", EXIT_FAILED)
    except UnicodeDecodeError:
        out.fail(f"{output} is not UTF-8 text: is it the config file?", EXIT_BAD_INPUT)
    except ConfigEditError as exc:
        out.fail(f"{output}: {exc}", EXIT_BAD_INPUT)
    source = str(output) if exists else "the example config"
    diff = _diff(current, text, source, str(output))
    document = {"path": str(output), "cards": len(snapshot.cards), "config": text}
    if exists and text == current:
        if out.json_mode:
            out.emit_json({**document, "diff": [], "changed": False})
        else:
            out.line(f"{output} already records this baseline ({len(snapshot.cards)} cards)")
        return 0
    if exists and not force:
        if not out.json_mode:
            for line in diff:
                out.line(line)
        out.fail(
            f"{output} exists: not changing it (--force writes the baseline keys shown above "
            "into it, every other line kept; or --output FILE)",
            EXIT_BAD_INPUT,
        )
    try:
        written = write_config(output, text)
    except NotARegularFile as exc:
        out.fail(f"not writing {output}: it is {exc.strerror}", EXIT_FAILED)
    except OSError as exc:
        out.fail(f"cannot write {output}: {exc.strerror}", EXIT_FAILED)
    if out.json_mode:
        out.emit_json({**document, "diff": diff, "changed": True})
    else:
        for line in diff:
            out.line(line)
        through = f" (through the link {output})" if written != output else ""
        out.line(f"wrote {written if through else output}{through} for {len(snapshot.cards)} cards")
    return 0
