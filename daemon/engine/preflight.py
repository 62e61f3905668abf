"""The mechanics of this host in a start's preflight: holders of the port or cards, drift.

Whether to start at all (the latch, critical checks, the CUDA probe, lint errors) is
recovery's start gate, decided before the start reaches the supervisor; the lint it reads
(``lint_refusals``, judged against this rig's cards: parallel sizes, fits-the-cards) is
here. The supervisor's preflight adds what is about this host and the launch itself, each
refusal naming what blocks and what to do: who holds the engine's port or the cards of the
active profile (a container by name and image, a process by pid and command line), and an
engine that runs but is not the active profile's (drift). Foreign processes on cards the
profile does not use, or on the driver's control nodes only, warn and never refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from daemon.rig.monitor import RigMonitor
from hwcheck.checks.foreign_gpu_processes import is_allowed
from hwcheck.model import DeviceHolder, RigProfile, card_of_device
from recovery.actions import RefusalCode
from serving.profiles import ProfileSet
from serving.recipe.cards import card_indices
from serving.recipe.checkpoint import CheckpointError, VerifyMode, verify_checkpoint
from serving.recipe.lint import RigCards, lint_recipe
from serving.recipe.model_dir import host_model_path
from serving.recipe.recipe import Recipe
from serving.runtime.foreign import (
    ContainerProbe,
    ContainerRef,
    Holder,
    listening_pids,
    process_command,
    shown_command,
)
from serving.runtime.ports import port_in_use
from serving.runtime.states import Drift, Refusal

HINT_CONTAINER = (
    "`--stop-foreign` stops a foreign container (SIGINT, then SIGTERM by docker|podman "
    "kill --signal; never SIGKILL)"
)
HINT_PROCESS = "stop it yourself: fleetd never signals a process it did not start"


def rig_cards(monitor: RigMonitor, rig: RigProfile) -> RigCards:
    """The rig's cards as the last poll saw them (memory per index) for the linter."""
    latest = monitor.view().latest
    if latest is None:
        return RigCards(count=rig.card_count, expected_mib=rig.memory_total_mib)
    memory = {c.index: c.memory_total_mib for c in latest.cards if c.memory_total_mib}
    return RigCards(count=len(latest.cards), memory_mib=memory, expected_mib=rig.memory_total_mib)


def rig_card_ids(monitor: RigMonitor) -> list[tuple[int, str]]:
    """``(index, uuid)`` of the cards of the last poll (for UUIDs in ``gpus``)."""
    latest = monitor.view().latest
    return [] if latest is None else [(card.index, card.uuid) for card in latest.cards]


def lint_refusals(
    recipe: Recipe, cards: RigCards, labels: Mapping[str, str] | None = None
) -> list[Refusal]:
    """The recipe's lint errors (waived ones are notes and do not refuse).

    ``labels``: the provenance labels its builds recorded (evidence of the fork).
    """
    return [
        Refusal("lint", finding.line())
        for finding in lint_recipe(recipe, host_checks=False, cards=cards, labels=labels)
        if finding.severity == "error"
    ]


def checkpoint_refusals(recipe: Recipe, mode: VerifyMode) -> list[Refusal]:
    """A missing, short or unreadable shard refuses the start, before any card is touched.

    Only a checkpoint this host can read is judged: a hub id, a container path no mount
    covers, or a directory that is not there (lint's ``model-path`` warning says so) pass.
    One line names the first bad file; a cold start that would fail on it 20 to 45 minutes
    in never begins.
    """
    if mode is VerifyMode.OFF:
        return []
    path = host_model_path(recipe.model, recipe.mounts, recipe.is_container)
    if path is None or not path.is_dir():
        return []
    try:
        report = verify_checkpoint(path, mode)
    except CheckpointError as exc:
        return [Refusal("checkpoint", f"{exc} (`fleetctl recipe verify` checks it)")]
    if report.ok:
        return []
    return [Refusal("checkpoint", f"{report.summary()} (`fleetctl recipe verify` lists all)")]


@dataclass
class ForeignScan:
    """What holds the engine's port or cards: blocking (the profile's) and elsewhere."""

    port: list[Holder] = field(default_factory=list)
    cards: list[Holder] = field(default_factory=list)
    elsewhere: list[Holder] = field(default_factory=list)

    def containers(self) -> list[ContainerRef]:
        """The foreign containers that block the start (what ``--stop-foreign`` stops)."""
        found: dict[str, ContainerRef] = {}
        for holder in (*self.port, *self.cards):
            if holder.container is not None:
                found.setdefault(holder.container.container_id, holder.container)
        return list(found.values())


class _Containers:
    """One scan's lookups, each asked of the runtime once."""

    def __init__(self, probe: ContainerProbe) -> None:
        self._probe = probe
        self._by_pid: dict[int, ContainerRef | None] = {}

    def of_pid(self, pid: int) -> ContainerRef | None:
        if pid not in self._by_pid:
            self._by_pid[pid] = self._probe.container_of_pid(pid)
        return self._by_pid[pid]

    def publishing(self, port: int) -> ContainerRef | None:
        return self._probe.container_publishing(port)


def _port_holders(host: str, port: int, containers: _Containers) -> list[Holder]:
    what = f"port {port}"
    published = containers.publishing(port)
    if published is not None:
        return [Holder(what, container=published)]
    holders = [
        Holder(what, pid, process_command(pid), containers.of_pid(pid))
        for pid in listening_pids(host, port)
    ]
    return holders or [Holder(what)]


def _device_holders(
    holders: Iterable[DeviceHolder], cards: frozenset[int] | None, containers: _Containers
) -> tuple[list[Holder], list[Holder]]:
    """Foreign device holders grouped per process: (on the profile's cards, elsewhere)."""
    by_pid: dict[int, list[DeviceHolder]] = {}
    for holder in holders:
        by_pid.setdefault(holder.pid, []).append(holder)
    blocking: list[Holder] = []
    elsewhere: list[Holder] = []
    for pid, held in sorted(by_pid.items()):
        first = held[0]
        numbers = sorted({n for h in held if (n := card_of_device(h.device)) is not None})
        mine = [n for n in numbers if cards is None or n in cards]
        shown = mine or numbers
        if shown:
            noun = "cards" if len(shown) > 1 else "card"
            what = f"{noun} {', '.join(map(str, shown))}"
        else:
            what = ", ".join(sorted({h.device for h in held}))
        container: ContainerRef | None = containers.of_pid(pid)
        if container is None and first.container:
            container = ContainerRef("docker", first.container, first.container, first.image or "?")
        command = shown_command(first.cmdline.split()) if first.cmdline else first.name
        (blocking if mine else elsewhere).append(Holder(what, pid, command, container))
    return blocking, elsewhere


def scan_foreign(
    recipe: Recipe,
    *,
    holders: Iterable[DeviceHolder],
    allowed: Iterable[str],
    probe: ContainerProbe,
    rig_cards_ids: Iterable[tuple[int, str]],
    port_is_ours: bool,
) -> ForeignScan:
    """Who, not ours, holds the recipe's port or cards (and other cards, to warn about).

    ``holders``: the host's, ours already left out (``HostSources.device_holders``).
    """
    containers = _Containers(probe)
    scan = ForeignScan()
    if recipe.port and not port_is_ours and port_in_use(recipe.host, recipe.port):
        scan.port = _port_holders(recipe.host, recipe.port, containers)
    allowed_names = tuple(allowed)
    foreign = [h for h in holders if not is_allowed(h, allowed_names)]
    cards = card_indices(recipe, rig_cards_ids)
    scan.cards, scan.elsewhere = _device_holders(foreign, cards, containers)
    return scan


def _hint(holders: list[Holder]) -> str:
    """What to do about each kind of holder among ``holders`` (containers, processes)."""
    hints = []
    if any(holder.container is not None for holder in holders):
        hints.append(HINT_CONTAINER)
    if any(holder.container is None for holder in holders):
        hints.append(HINT_PROCESS)
    return "; ".join(hints)


def foreign_refusals(recipe: Recipe, scan: ForeignScan) -> list[Refusal]:
    """The scan as refusals: the port and the profile's cards block, other cards warn."""
    refusals: list[Refusal] = []
    if scan.port:
        named = "; ".join(holder.describe() for holder in scan.port)
        message = f"port {recipe.port} on {recipe.host} is taken: {named} ({_hint(scan.port)})"
        refusals.append(Refusal(RefusalCode.PORT_IN_USE, message))
    if scan.cards:
        named = "; ".join(holder.describe() for holder in scan.cards)
        message = f"the profile's cards are held: {named} ({_hint(scan.cards)})"
        refusals.append(Refusal(RefusalCode.GPUS_HELD, message))
    if scan.elsewhere:
        named = "; ".join(holder.describe() for holder in scan.elsewhere[:5])
        message = f"other processes hold GPUs outside this profile's cards: {named}"
        refusals.append(Refusal(RefusalCode.FOREIGN_GPU_PROCESSES, message, blocking=False))
    return refusals


def blocking_for_switch(recipe: Recipe, scan: ForeignScan, stop_foreign: bool) -> list[Refusal]:
    """What in ``scan`` would refuse ``recipe``'s start once the running engine has stopped.

    Known before anything stops, so a switch refuses with the engine still serving (a
    cold start costs 20 to 45 minutes). With ``stop_foreign`` the foreign containers are
    stopped first: then only what is not a container (a bare process, a holder fleetd
    cannot see) still blocks.
    """
    if stop_foreign:
        scan = ForeignScan(
            port=[holder for holder in scan.port if holder.container is None],
            cards=[holder for holder in scan.cards if holder.container is None],
        )
    return [refusal for refusal in foreign_refusals(recipe, scan) if refusal.blocking]


def drift_refusal(drift: Drift, profiles: ProfileSet, active: str) -> Refusal:
    """``start`` explains an engine that runs but is not the active profile's."""
    runs = drift.recipe_hash[:12] or "no cmpfleet.recipe-hash label"
    message = (
        f"{drift.what()} at {drift.url} runs recipe {runs}, not profile {active!r} "
        f"({drift.expected_hash[:12]}); fleetd left it running and did not adopt it"
    )
    matching = profiles.matching(drift.recipe_hash) if drift.recipe_hash else []
    steps = [f"`fleetctl serve {matching[0]}` serves it as it is"] if matching else []
    if drift.container_name:
        steps.append(f"`fleetctl start --stop-foreign` stops it and starts {active!r}")
    else:
        steps.append(f"stop it (`kill -INT {drift.pid}`, vLLM's graceful stop), then start")
    return Refusal(RefusalCode.ENGINE_DRIFT, f"{message}: {', or '.join(steps)}")
