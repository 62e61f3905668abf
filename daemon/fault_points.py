"""Named crash points for the crash tests: ``CMPFLEET_FAULT_POINT=NAME`` ends fleetd there.

Whether a kill -9 between reading a hardware Xid and recording its decision leaves the
engine serving on a faulty card cannot be tested by timing luck (the window is a few
milliseconds). Each point below sits between two steps of that path; a fleetd started
with the variable naming one exits at once (``os._exit``: no cleanup, like a SIGKILL)
the first time it gets there, and the test restarts it on the same state dir. Unset (as
in production), a point costs one environment lookup.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("fleetd")

ENV = "CMPFLEET_FAULT_POINT"
EXIT_CODE = 137  # what a shell reports for a SIGKILL

XID_READ = "xid_read"  # a new Xid parsed; nothing decided, nothing stored
LATCH_SET = "latch_set"  # the latch set in memory and its file; the stop not yet queued
XID_STORED = "xid_stored"  # the Xid and the kernel-log cursor committed to the store
DECISION_RECORDING = "decision_recording"  # the stop done; its audit row not yet stored
POINTS = (XID_READ, LATCH_SET, XID_STORED, DECISION_RECORDING)


def reached(point: str) -> None:
    """End the process at once when ``CMPFLEET_FAULT_POINT`` names ``point``."""
    if os.environ.get(ENV) == point:
        log.critical("fault point %s reached: exiting at once (%s is set)", point, ENV)
        logging.shutdown()
        os._exit(EXIT_CODE)
