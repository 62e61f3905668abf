"""Test helpers shared across test modules (once in tests.daemon.store.test_store_health).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs (root only): a real filesystem the test can fill up."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> Path:
    """Write zeros until the filesystem is full; the filler file."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as out:
        while True:
            out.write(chunk)
    return filler
