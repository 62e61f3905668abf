"""Running the host's reboot or power cycle, or, under ``--simulate``, the simulated reboot.

Only a person's confirmation reaches here (``fleetctl reboot --confirm [--cold]``, ``POST
/api/v1/recovery/reboot {"confirm": true[, "cold": true]}``), after a clean engine stop.
``[recovery] reboot_command`` and the optional ``power_cycle_command`` (an IPMI or
smart-plug call) are argv lists, never shell strings. Under ``--simulate`` no host
command runs (a developer's laptop must not reboot): the simulated reboot does, and the
record says which command a real rig would have run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence

from daemon.config import ConfigError, Settings

REBOOT_COMMAND_TIMEOUT_S = 60.0


class RebootFailed(Exception):
    """The command could not run or said no; the message is one line."""


def _run(argv: Sequence[str]) -> str:
    """Run ``argv``; ``RebootFailed`` when it cannot start or exits non-zero."""
    shown = shlex.join(argv)
    try:
        done = subprocess.run(
            list(argv),
            check=False,
            capture_output=True,
            text=True,
            timeout=REBOOT_COMMAND_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RebootFailed(f"{shown} could not run: {exc}") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:200]
        raise RebootFailed(f"{shown} exited {done.returncode}: {said}")
    return shown


class HostCommandRunner:
    """``HostCommands`` that run ``[recovery] reboot_command`` / ``power_cycle_command``."""

    def __init__(self, reboot: Sequence[str], power_cycle: Sequence[str] | None) -> None:
        self._reboot = list(reboot)
        self._power_cycle = None if power_cycle is None else list(power_cycle)

    def _argv(self, cold: bool) -> list[str] | None:
        return self._power_cycle if cold else self._reboot

    def describe(self, cold: bool) -> str | None:
        """The command, shell-quoted for a person to read (None: not configured)."""
        argv = self._argv(cold)
        return None if argv is None else shlex.join(argv)

    def run(self, cold: bool) -> str:
        """Run it; ``RebootFailed`` when it cannot start or exits non-zero."""
        argv = self._argv(cold)
        if argv is None:
            raise RebootFailed("no [recovery] power_cycle_command is configured")
        return _run(argv)


NO_POWER_CYCLE_COMMAND = (
    "no [recovery] power_cycle_command: on a real rig a person switches the rig off for about 30 s"
)


class SimulatedHostCommands:
    """``HostCommands`` under ``--simulate``: the simulated reboot, never the host's command.

    A cold power cycle works without ``power_cycle_command`` here (the README's tour runs
    ``reboot --confirm --cold`` on a simulated rig): the simulated rig is power-cycled and
    the record says that a real rig would need the command, or a person at the switch.
    """

    def __init__(
        self,
        simulate_reboot: Callable[[], str],
        reboot: Sequence[str],
        power_cycle: Sequence[str] | None,
    ) -> None:
        self._simulate_reboot = simulate_reboot
        self._commands = HostCommandRunner(reboot, power_cycle)

    def describe(self, cold: bool) -> str:
        """What runs here, and what a real rig would run."""
        what = "power cycle" if cold else "reboot"
        return f"the simulated {what} ({self._real(cold, 'would run')})"

    def _real(self, cold: bool, would: str) -> str:
        command = self._commands.describe(cold)
        return NO_POWER_CYCLE_COMMAND if command is None else f"a real rig {would}: {command}"

    def run(self, cold: bool) -> str:
        """Reboot (or power-cycle) the simulated host; the record names the rig's command."""
        boot_id = self._simulate_reboot()
        what = "power cycle" if cold else "reboot"
        return f"the simulated {what} (new boot id {boot_id}); {self._real(cold, 'would have run')}"


def host_commands(
    settings: Settings, simulated: bool, simulate_reboot: Callable[[], str]
) -> HostCommandRunner | SimulatedHostCommands:
    """The host's reboot and power-cycle commands, or under ``--simulate`` the simulated reboot."""
    recovery = settings.recovery
    if simulated:
        return SimulatedHostCommands(
            simulate_reboot, recovery.reboot_command, recovery.power_cycle_command
        )
    return HostCommandRunner(recovery.reboot_command, recovery.power_cycle_command)


def check_host_commands(settings: Settings, source: str) -> None:
    """Each configured host command's program exists (a real rig; at load, exit 2).

    Found only when a person confirms a reboot, a missing program fails after the engine
    was already stopped (``["systemctl reboot"]`` is one program name, with a space).
    """
    recovery = settings.recovery
    for key, argv in (
        ("reboot_command", recovery.reboot_command),
        ("power_cycle_command", recovery.power_cycle_command),
    ):
        if not argv:
            continue
        program = argv[0]
        found = (
            os.path.isfile(program) and os.access(program, os.X_OK)
            if os.sep in program
            else shutil.which(program) is not None
        )
        if not found:
            raise ConfigError(
                f"{source}: recovery.{key}: {program!r} is not an executable program "
                "(an argv list: the program, then each argument)"
            )
