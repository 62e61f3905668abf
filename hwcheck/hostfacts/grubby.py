"""Ask ``grubby --info=DEFAULT`` which entry boots next, where grubby exists.

On Fedora and RHEL grubby is the authority on the default entry (it knows the BLS entries,
``$kernelopts`` and saved_entry together), so its answer beats reading the files. It is a
read: ``--info`` changes nothing. The parsing lives in ``bootloader``; this module only
runs the program (an argv list, a time limit, no shell).
"""

from __future__ import annotations

import logging
import shutil
import subprocess

_LOG = logging.getLogger(__name__)
GRUBBY_TIMEOUT_S = 5.0  # it runs on fleetd's poll thread, once a minute


def grubby_default_info(timeout_s: float = GRUBBY_TIMEOUT_S) -> str | None:
    """grubby's description of the default entry; None without grubby or on any failure."""
    program = shutil.which("grubby")
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, "--info=DEFAULT"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _LOG.warning("grubby --info=DEFAULT did not answer: %s", exc)
        return None
    if done.returncode != 0:
        _LOG.warning("grubby --info=DEFAULT failed (exit %d)", done.returncode)
        return None
    return done.stdout
