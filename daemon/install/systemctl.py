"""The one place ``fleetd install``/``uninstall`` runs ``systemctl`` (an argv list, bounded).

Only on the running system (``--root /`` with systemd as PID 1): a unit written into
another root is that system's business when it boots.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SYSTEMD_RUNNING = Path("/run/systemd/system")
TIMEOUT_S = 60.0


def systemd_runs(root: Path) -> bool:
    """True when ``root`` is this machine's ``/`` and systemd manages it."""
    return (
        root.resolve() == Path("/") and SYSTEMD_RUNNING.is_dir() and bool(shutil.which("systemctl"))
    )


def systemctl(*args: str) -> str | None:
    """Run ``systemctl ARGS``; ``None`` when it worked, else its error in one line."""
    try:
        result = subprocess.run(
            ["systemctl", *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"systemctl {' '.join(args)}: {exc}"
    if result.returncode == 0:
        return None
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    return f"systemctl {' '.join(args)}: {lines[-1] if lines else f'exit {result.returncode}'}"
