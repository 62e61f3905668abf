"""Read one small text file of ``/proc``, ``/sys`` or ``/boot`` the way every reader here does.

A file that is absent is normal (no such driver, no such bootloader: the reader says
"unknown"); one that cannot be read for another reason is logged once per call with the
reason and also read as None, never raised: a reader must not cost the rest of a poll.
"""

from __future__ import annotations

import logging
from pathlib import Path

_LOG = logging.getLogger(__name__)


def read_text(path: Path) -> str | None:
    """The file's text (undecodable bytes replaced); None when absent or unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        _LOG.warning("cannot read %s: %s", path, exc.strerror or exc)
        return None
