"""cmpfleet's version, written once and cheap to read.

The package metadata takes its version from here (``pyproject.toml``: ``dynamic``), so
``fleetctl --version`` answers without ``importlib.metadata`` scanning the installed
distributions (tens of milliseconds, on a command people run to check a rig quickly).
``build_info`` is what ``/healthz``, the status document and ``cmpfleet_build_info`` say.
"""

from __future__ import annotations

import platform

__version__ = "0.1.0"


def build_info() -> dict[str, str]:
    """The version and the Python running it (labels of ``cmpfleet_build_info``)."""
    return {
        "version": __version__,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }
