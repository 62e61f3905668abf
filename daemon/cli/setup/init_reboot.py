"""The reboot command ``fleetctl init`` writes: one that exists on this host.

The documented example says ``reboot_command = ["systemctl", "reboot"]`` (under the
installed unit a reboot must go through systemd: the sandbox filters reboot(2)). A host
without systemd has no ``systemctl``: a config naming it leaves ``fleetctl reboot
--confirm`` unable to reboot (fleetd warns: the ``reboot_command`` check). So a new config
gets the first of these that is on this host, or the key left commented with a note.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable

# In order of preference: systemd's, then SysV/BusyBox init's.
CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("systemctl", "reboot"),
    ("shutdown", "-r", "now"),
    ("reboot",),
)
_KEY_LINE = re.compile(r"^reboot_command = .*$", re.MULTILINE)


def _toml(argv: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(word) for word in argv) + "]"


def reboot_command_here(
    which: Callable[[str], str | None] = shutil.which,
) -> tuple[str, ...] | None:
    """The first candidate whose program is on this host's ``PATH`` (None: none is)."""
    return next((argv for argv in CANDIDATES if which(argv[0]) is not None), None)


def with_host_reboot_command(text: str, which: Callable[[str], str | None] = shutil.which) -> str:
    """``text`` (the example config) with a ``reboot_command`` this host can run."""
    found = reboot_command_here(which)
    if found == CANDIDATES[0]:
        return text
    if found is not None:
        line = (
            f"# fleetctl init: no systemctl on this host; {found[0]} is.\n"
            f"reboot_command = {_toml(found)}"
        )
    else:
        tried = ", ".join(argv[0] for argv in CANDIDATES)
        line = (
            f"# fleetctl init found none of {tried} on this host: set the command that "
            "reboots it\n"
            f"# (until then fleetctl reboot --confirm refuses and fleetd warns).\n"
            f"# reboot_command = {_toml(CANDIDATES[0])}"
        )
    return _KEY_LINE.sub(lambda _: line, text, count=1)
