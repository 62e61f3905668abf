"""Outside programs for tests: install when we can, skip naming the package, fail under CI.

docs/architecture.md "Tests: what is real and what is simulated": tests that need an
outside program install it when they can (root with apt) and otherwise skip with a message
naming the package; under ``CI=true`` a missing one is a failure, never a skip.
``CMPFLEET_TEST_APT=0`` installs nothing (``scripts/dev test`` says which it may install
before pytest starts); each install also says so on the terminal first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_APT_LOCK = Path("/tmp/cmpfleet-tests-apt.lock")


def in_ci() -> bool:
    """True when running under CI (``CI=true``)."""
    return os.environ.get("CI", "").lower() == "true"


def _apt_install(package: str) -> None:
    """Install one Debian package as root, serialised across test processes."""
    with _APT_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Past pytest's capture: a person sees what is installed before it is.
        print(
            f"tests: apt-get install {package} (root; CMPFLEET_TEST_APT=0 skips instead)",
            file=sys.__stderr__,
            flush=True,
        )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", package],
            env=env,
            check=False,
            capture_output=True,
            timeout=600,
        )


def require_program(binary: str, apt_package: str) -> str:
    """Path of ``binary``; install ``apt_package`` if root; else skip (fail under CI)."""
    found = shutil.which(binary)
    may_install = os.environ.get("CMPFLEET_TEST_APT", "1") != "0"
    if found is None and may_install and os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_install(apt_package)
        found = shutil.which(binary)
    if found is not None:
        return found
    message = (
        f"needs `{binary}` from the Debian package `{apt_package}` (apt-get install {apt_package})"
    )
    if in_ci():
        pytest.fail(f"{message}: missing under CI=true", pytrace=False)
    pytest.skip(message)


def require_root(why: str) -> None:
    """Skip (fail under CI) unless running as root."""
    if os.geteuid() == 0:
        return
    message = f"needs root: {why}"
    if in_ci():
        pytest.fail(f"{message}: CI runs as root", pytrace=False)
    pytest.skip(message)
