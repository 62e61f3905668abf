"""Running the host's reboot, or, under ``--simulate``, the simulated one.

Only a person's confirmation reaches here (``fleetctl reboot --confirm``, ``POST
/api/v1/recovery/reboot {"confirm": true}``), after a clean engine stop. The configured
``[recovery] reboot_command`` is an argv list, never a shell string. Under ``--simulate``
the host command never runs (a developer's laptop must not reboot): the simulated reboot
does, and the record says which command a real rig would have run.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Sequence

from daemon.config import Settings

REBOOT_COMMAND_TIMEOUT_S = 60.0


class RebootFailed(Exception):
    """The reboot command could not run or said no; the message is one line."""


class CommandRebootRunner:
    """``RebootRunner`` that runs ``[recovery] reboot_command`` on the host."""

    def __init__(self, argv: Sequence[str]) -> None:
        self._argv = list(argv)

    def describe(self) -> str:
        """The command, shell-quoted for a person to read."""
        return shlex.join(self._argv)

    def reboot(self) -> str:
        """Run the command; ``RebootFailed`` when it cannot start or exits non-zero."""
        try:
            done = subprocess.run(
                self._argv,
                check=False,
                capture_output=True,
                text=True,
                timeout=REBOOT_COMMAND_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RebootFailed(f"{self.describe()} could not run: {exc}") from None
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout).split())[:200]
            raise RebootFailed(f"{self.describe()} exited {done.returncode}: {said}")
        return self.describe()


class SimulatedRebootRunner:
    """``RebootRunner`` under ``--simulate``: the simulated reboot, never the host's."""

    def __init__(self, simulate_reboot: Callable[[], str], rig_argv: Sequence[str]) -> None:
        self._simulate_reboot = simulate_reboot
        self._rig_command = shlex.join(rig_argv)

    def describe(self) -> str:
        """What runs here, and what a real rig would run."""
        return f"the simulated reboot (a real rig would run: {self._rig_command})"

    def reboot(self) -> str:
        """Reboot the simulated host; the record names the rig's command."""
        boot_id = self._simulate_reboot()
        return (
            f"the simulated reboot (new boot id {boot_id}); "
            f"a real rig would have run: {self._rig_command}"
        )


def reboot_runner(
    settings: Settings, simulated: bool, simulate_reboot: Callable[[], str]
) -> CommandRebootRunner | SimulatedRebootRunner:
    """The host's reboot command, or under ``--simulate`` the simulated reboot."""
    argv = settings.recovery.reboot_command
    if simulated:
        return SimulatedRebootRunner(simulate_reboot, argv)
    return CommandRebootRunner(argv)
