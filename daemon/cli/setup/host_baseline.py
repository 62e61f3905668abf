"""The host baseline for ``fleetctl init``: what it records, and what ``init --show`` prints.

``init`` records today's host facts as the config's ``[host]`` table (``record``); fleetd
records the same at its first start into its state dir when the config holds none.
``init --show`` prints the baseline in force: the config's ``[host]`` keys over fleetd's
recorded file (readable as root), or under ``--simulate`` over the simulated rig's own;
with nothing recorded anywhere it shows what ``init`` would record now.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from daemon.cli.output import EXIT_FAILED, Output
from daemon.cli.rig.host_judging import recorded_baseline
from daemon.cli.setup.config_edit import TableUpdate
from daemon.config import ConfigError, load_cli_settings
from daemon.statedir import StateDir
from hwcheck.backend import BackendError
from hwcheck.host import HostSources
from hwcheck.hostfacts.baseline import (
    HostBaseline,
    baseline_table,
    baseline_toml,
    merge_baseline,
    record_baseline,
)
from hwcheck.hostfacts.document import facts_document
from hwcheck.model import RigSnapshot
from hwcheck.sim.scenario import ScenarioError, load_scenario

STOCK_BAR1_MAX_MIB = 1024  # the stock kernel leaves 256 MiB; the patched one 64 GiB


def record(host: HostSources, snapshot: RigSnapshot) -> HostBaseline | None:
    """Today's host facts as a baseline (None where the host facts cannot be read)."""
    if host.host_facts is None:
        return None
    return record_baseline(snapshot, host.host_facts(snapshot), snapshot.taken_at)


def host_baseline_updates(host: HostSources, snapshot: RigSnapshot) -> list[TableUpdate]:
    """What ``init`` writes for the host: ``[host]`` and one ``[host.cards."<address>"]`` per card.

    A card without the 64 GB BAR1 gets a warning comment on its ``bar1_mib``: this host is
    no good baseline for it (the bridge-window patch or kernel arguments are missing).
    """
    baseline = record(host, snapshot)
    if baseline is None:
        return []
    table = baseline_table(baseline)
    cards: dict[str, dict[str, Any]] = table.pop("cards", {})
    # When, as a comment (as the cards' baseline does): re-running init on an unchanged
    # host then changes nothing.
    stamp = f"recorded by fleetctl init on {table.pop('recorded_at', 'an unknown date')}"
    first = next(iter(table), None)
    comments = {} if first is None else {first: stamp}
    updates = [TableUpdate(("host",), _lists(table), comments=comments)]
    for address, card in cards.items():
        bar1 = card.get("bar1_mib")
        warning = (
            {"bar1_mib": "WARNING: no 64 GB BAR1 here: record the baseline on the patched kernel"}
            if isinstance(bar1, int) and bar1 < STOCK_BAR1_MAX_MIB
            else {}
        )
        updates.append(
            TableUpdate(("host", "cards", address), _lists(card), replace=True, comments=warning)
        )
    return updates


def _lists(values: dict[str, Any]) -> dict[str, Any]:
    """Tuples as lists (TOML arrays)."""
    return {key: list(v) if isinstance(v, tuple) else v for key, v in values.items()}


def _in_force(
    host: HostSources, snapshot: RigSnapshot, pins: HostBaseline, state_dir: Path | None
) -> tuple[HostBaseline, str]:
    """The baseline in force and where it comes from."""
    recorded, source = None, ""
    if state_dir is not None:
        recorded = recorded_baseline(state_dir)
        source = f"{StateDir(state_dir).host_baseline} (recorded by fleetd)" if recorded else ""
    if recorded is None and host.known_good_baseline is not None:
        recorded, source = host.known_good_baseline(), "the simulated rig's own baseline"
    baseline = merge_baseline(recorded, pins)
    if pins.recorded:
        source = (
            f"{source} with the config's [host] keys" if source else "the config's [host] table"
        )
    if not baseline.recorded:
        now = record(host, snapshot)
        if now is not None:
            return now, "nothing recorded yet: this is what fleetctl init would record now"
    return baseline, source


def show(out: Output, config: Path | None, simulate: str | None, state_dir: Path) -> int:
    """Print the host baseline in force (TOML a config can take), or its JSON."""
    try:
        pins = load_cli_settings(config).host
        if simulate is not None:
            from hwcheck.sim.rig import SimulatedRig

            with tempfile.TemporaryDirectory(prefix="cmpfleet-show-") as temp:
                host = SimulatedRig(load_scenario(simulate), Path(temp)).host_sources()
                document = _document(host, pins, None)
        else:
            from hwcheck.realhost import real_host_sources

            host = real_host_sources()
            try:
                document = _document(host, pins, state_dir)
            finally:
                host.close()
    except (ConfigError, ScenarioError, BackendError) as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(document)
    else:
        out.line(f"# host baseline: {document['source']}")
        out.line(document["toml"].rstrip("\n"))
    return 0


def _document(host: HostSources, pins: HostBaseline, state_dir: Path | None) -> dict[str, Any]:
    try:
        snapshot = host.gpu.snapshot()
        baseline, source = _in_force(host, snapshot, pins, state_dir)
        facts = None if host.host_facts is None else host.host_facts(snapshot)
    finally:
        host.close()
    return {
        "source": source,
        "baseline": baseline.model_dump(mode="json", exclude_none=True),
        "toml": baseline_toml(baseline),
        "facts": None if facts is None else facts_document(facts),
    }
