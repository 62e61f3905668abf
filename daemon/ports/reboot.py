"""Running the host's reboot or power cycle, or, under ``--simulate``, the simulated reboot.

Only a person's confirmation reaches here (``fleetctl reboot --confirm [--cold]``, ``POST
/api/v1/recovery/reboot {"confirm": true[, "cold": true]}``), after a clean engine stop.
``[recovery] reboot_command`` and the optional ``power_cycle_command`` (an IPMI or
smart-plug call) are argv lists, never shell strings. Under ``--simulate`` no host
command runs (a developer's laptop must not reboot): the simulated reboot does, and the
record says which command a real rig would have run.

A program that is not on this host (``systemctl`` on a host without systemd) does not
stop fleetd: a monitoring daemon that will not start because a reboot command is missing
watches nothing. The ``reboot_command`` check warns, naming the program and the key, and
``reboot --confirm`` refuses with that reason before it stops anything. A malformed value
(empty, not a list of strings) is still refused at load (``recovery.settings``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence

from daemon.config import Settings
from hwcheck.checks.readings import HostCommandsReading

REBOOT_COMMAND_TIMEOUT_S = 60.0
KEYS = {False: "reboot_command", True: "power_cycle_command"}


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


def program_found(program: str) -> bool:
    """An executable file at that path, or a program of that name on ``PATH``."""
    if os.sep in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def missing_program(key: str, argv: Sequence[str]) -> str | None:
    """Why ``argv`` cannot run here, naming the key and the program (None: it can)."""
    if not argv or program_found(argv[0]):
        return None
    return (
        f"[recovery] {key}: {argv[0]!r} is not an executable program on this host "
        "(an argv list: the program, then each argument)"
    )


class HostCommandRunner:
    """``HostCommands`` that run ``[recovery] reboot_command`` / ``power_cycle_command``."""

    def __init__(
        self,
        reboot: Sequence[str],
        power_cycle: Sequence[str] | None,
        next_boot: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``next_boot``: the default boot entry when it is not the baseline kernel."""
        self._reboot = list(reboot)
        self._power_cycle = None if power_cycle is None else list(power_cycle)
        self._next_boot = next_boot

    def _argv(self, cold: bool) -> list[str] | None:
        return self._power_cycle if cold else self._reboot

    def describe(self, cold: bool) -> str | None:
        """The command, shell-quoted for a person to read (None: not configured)."""
        argv = self._argv(cold)
        return None if argv is None else shlex.join(argv)

    def unavailable(self, cold: bool) -> str | None:
        """Why the command cannot run on this host (its program is missing); None: it can."""
        argv = self._argv(cold)
        return None if argv is None else missing_program(KEYS[cold], argv)

    def wrong_boot(self) -> str | None:
        """The default boot entry when the reboot would not boot the baseline kernel."""
        return self._next_boot()

    def reading(self) -> HostCommandsReading | None:
        """The ``reboot_command`` check's reading: each configured program missing here."""
        missing = tuple(why for why in (self.unavailable(False), self.unavailable(True)) if why)
        return HostCommandsReading(shlex.join(self._reboot), missing)

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
        next_boot: Callable[[], str | None] = lambda: None,
        cannot_reboot: Callable[[], str | None] = lambda: None,
    ) -> None:
        """Commands of the simulated host.

        ``next_boot``: the simulated host's default entry when it is not the baseline;
        ``cannot_reboot``: why the simulated host cannot reboot now (its disk read-only).
        """
        self._simulate_reboot = simulate_reboot
        self._cannot_reboot = cannot_reboot
        self._commands = HostCommandRunner(reboot, power_cycle, next_boot)

    def unavailable(self, cold: bool) -> str | None:
        """Why the simulated reboot cannot run: asked before the engine is stopped.

        The host's program is never run; a read-only state dir (the simulated host's disk)
        would fail the reboot after the engine was stopped for it (issue 36).
        """
        return self._cannot_reboot()

    def wrong_boot(self) -> str | None:
        """The simulated default entry, judged as a real one (the simulated reboot boots it)."""
        return self._commands.wrong_boot()

    def reading(self) -> HostCommandsReading | None:
        """No ``reboot_command`` reading: the host's command never runs under ``--simulate``."""
        return None

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
    settings: Settings,
    simulated: bool,
    simulate_reboot: Callable[[], str],
    next_boot: Callable[[], str | None] = lambda: None,
    cannot_reboot: Callable[[], str | None] = lambda: None,
) -> HostCommandRunner | SimulatedHostCommands:
    """The host's reboot and power-cycle commands, or under ``--simulate`` the simulated reboot.

    ``next_boot`` says what the next boot would come up on when it is not the baseline
    kernel (``HostWatch.wrong_next_boot``): a confirmed reboot refuses it without ``force``.
    """
    recovery = settings.recovery
    if simulated:
        return SimulatedHostCommands(
            simulate_reboot,
            recovery.reboot_command,
            recovery.power_cycle_command,
            next_boot,
            cannot_reboot,
        )
    return HostCommandRunner(recovery.reboot_command, recovery.power_cycle_command, next_boot)


def missing_host_programs(settings: Settings) -> list[str]:
    """Each configured host command whose program is not here, in words (fleetd warns)."""
    recovery = settings.recovery
    found = (
        missing_program("reboot_command", recovery.reboot_command),
        missing_program("power_cycle_command", recovery.power_cycle_command or []),
    )
    return [why for why in found if why]
