"""``foreign_gpu_processes``: processes other than the engine holding ``/dev/nvidia*``.

Xorg, display managers and streaming services keep GPU contexts open; they have blocked
resets on these rigs and eat memory the engine expects; another vLLM container takes the
engine's cards. Some holders belong on every rig and are never foreign:
``nvidia-persistenced`` (the ``persistence_mode`` remedy recommends it) and ``fleetd``
(NVML keeps ``/dev/nvidiactl`` open), plus the names in ``[rig] allowed_gpu_processes``.
The engine's own process tree (process or container) and the scanning process are
excluded by pid before the holders reach this check.

The remedy fits the holder: a container is stopped with its runtime (or ``--stop-foreign``),
a display server by stopping the display manager, anything else by its pid. A holder of
only cards the profile in force does not use (``RigNow.profile_cards``) is not this rig's
problem: it is named in an ok result, as information, and warns nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, DeviceHolder, Severity

CHECK_ID = "foreign_gpu_processes"

# Process names (``comm``) that hold GPU devices on every healthy rig.
BUILTIN_ALLOWED_NAMES: tuple[str, ...] = ("nvidia-persistenced", "fleetd")
# Display servers, compositors and desktop streaming: the display manager owns them.
DISPLAY_NAMES: tuple[str, ...] = (
    "Xorg", "X", "Xwayland", "gnome-shell", "gdm*", "sddm*", "lightdm*", "kwin*",
    "plasmashell", "mutter*", "xfwm4", "sunshine", "parsecd",
)  # fmt: skip
ALLOW_HINT = "or allow-list its name in [rig] allowed_gpu_processes"


def is_allowed(holder: DeviceHolder, allowed_names: Iterable[str]) -> bool:
    """True when the holder's process name matches a built-in or configured name (globs ok)."""
    names = (*BUILTIN_ALLOWED_NAMES, *allowed_names)
    return any(fnmatch.fnmatchcase(holder.name, pattern) for pattern in names)


def _container(holder: DeviceHolder) -> str | None:
    return holder.container or holder.cgroup_container


def _listed(holders: Sequence[DeviceHolder]) -> tuple[int, str]:
    by_pid: dict[tuple[int, str, str | None], list[str]] = {}
    for holder in holders:
        by_pid.setdefault((holder.pid, holder.name, _container(holder)), []).append(holder.device)
    text = "; ".join(
        f"pid {pid} {name}{f' in container {boxed}' if boxed else ''} ({', '.join(sorted(devices))})"
        for (pid, name, boxed), devices in sorted(by_pid.items(), key=lambda item: item[0][:2])
    )
    return len(by_pid), text


def remedy_for(holders: Sequence[DeviceHolder]) -> str:
    """What to do about these holders, one step per kind: container, display, process."""
    containers = sorted({boxed for h in holders if (boxed := _container(h))})
    display = sorted({h.name for h in holders if not _container(h) and _is_display(h)})
    others = sorted({(h.pid, h.name) for h in holders if not _container(h) and not _is_display(h)})
    steps = []
    if containers:
        named = ", ".join(containers)
        steps.append(
            f"container {named}: stop it (docker|podman stop NAME), or fleetctl start "
            "--stop-foreign stops it when it holds the profile's cards"
        )
    if display:
        steps.append(
            f"{', '.join(display)}: a display server; stop the display manager (systemctl "
            "stop display-manager; a headless rig needs none)"
        )
    if others:
        listed = ", ".join(f"pid {pid} ({name})" for pid, name in others)
        steps.append(f"{listed}: stop it when it is not yours to keep, {ALLOW_HINT}")
    return "; ".join(steps)


def _is_display(holder: DeviceHolder) -> bool:
    return any(fnmatch.fnmatchcase(holder.name, pattern) for pattern in DISPLAY_NAMES)


def _outside(holders: Sequence[DeviceHolder], cards: frozenset[int] | None) -> set[int]:
    """The pids that hold only cards outside ``cards`` (the profile in force's)."""
    if cards is None:
        return set()
    by_pid: dict[int, list[int | None]] = {}
    for holder in holders:
        by_pid.setdefault(holder.pid, []).append(holder.card)
    return {
        pid for pid, held in by_pid.items() if all(c is not None and c not in cards for c in held)
    }


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result."""
    allowed_names = inp.profile.allowed_gpu_processes
    candidates = [h for h in inp.holders if not is_allowed(h, allowed_names)]
    allowed = [h for h in inp.holders if is_allowed(h, allowed_names)]
    outside = _outside(candidates, inp.rig_now.profile_cards)
    foreign = [h for h in candidates if h.pid not in outside]
    elsewhere = [h for h in candidates if h.pid in outside]
    if not foreign:
        message = "no foreign process holds /dev/nvidia*"
        notes = []
        if elsewhere:
            count, text = _listed(elsewhere)
            notes.append(f"{count} on cards the profile in force does not use: {text}")
        if allowed:
            count, text = _listed(allowed)
            notes.append(f"{count} allowed: {text}")
        if notes:
            message += f" ({'; '.join(notes)})"
        return [CheckResult(CHECK_ID, None, Severity.OK, message)]
    count, text = _listed(foreign)
    message = f"{count} foreign process(es) hold GPU devices: {text}"
    if elsewhere:
        others, listed = _listed(elsewhere)
        message += f" (and {others} on cards the profile does not use: {listed})"
    return [CheckResult(CHECK_ID, None, Severity.WARNING, message, remedy_for(foreign))]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "foreign GPU processes",
        "Something other than the engine, fleetd or nvidia-persistenced holds /dev/nvidia*: a "
        "display server, a streaming service, another container. It takes memory, blocks GPU "
        "resets and, on the profile's cards, the engine's start. A holder of a card the "
        "profile in force does not use is shown as information only.",
        "a container: docker|podman stop NAME, or fleetctl start --stop-foreign; Xorg or a "
        "display manager: systemctl stop display-manager (or disable it on a headless rig); "
        "another process: stop it, or allow-list its name in [rig] allowed_gpu_processes.",
    ),
    alert=Alert("ForeignGpuProcess", "Foreign process on the GPUs"),
    tag="FOREIGN",
)
