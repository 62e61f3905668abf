"""Test helpers shared across test modules (once in tests.daemon.install.test_systemd_unit).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.external import require_program

MAX_EXPOSURE = 5.0


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    program = require_program("systemd-analyze", "systemd")
    return subprocess.run([program, *args], capture_output=True, text=True, timeout=60, check=False)


def exposure(unit: Path) -> tuple[float, list[str]]:
    """The overall exposure systemd rates ``unit`` at, and the options it marks missing."""
    result = analyze("security", "--offline=true", str(unit))
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert found, result.stdout + result.stderr
    missing = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("✗")]
    return float(found.group(1)), missing
