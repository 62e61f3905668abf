"""What a process forked by the suite's launcher sees of itself, as JSON on stdout.

Run by ``tests/test_prefork.py`` through the launcher and as a fresh interpreter, so the
two can be compared: its descriptors, environment, directory, umask, ``sys.argv``, signal
dispositions and standard streams.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time


def main() -> None:
    """Print the facts; ``exit N`` or ``raise`` as the first argument ends that way."""
    umask = os.umask(0)
    os.umask(umask)
    fds = sorted(int(name) for name in os.listdir("/proc/self/fd"))
    facts = {
        "fds": fds[:-1] if len(fds) > 3 else fds,  # the listing's own descriptor is the last
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": umask,
        "argv": sys.argv[1:],
        "sigchld_default": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
        "sigpipe_ignored": signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN,
        "threads": threading.active_count(),
        "stdout_line_buffered": sys.stdout.line_buffering,
        "stdin": sys.stdin.read(),
    }
    print(json.dumps(facts))
    sys.stderr.write("to stderr\n")
    if sys.argv[1:2] == ["exit"]:
        sys.exit(int(sys.argv[2]))
    if sys.argv[1:2] == ["raise"]:
        raise RuntimeError("raised on purpose")
    if sys.argv[1:2] == ["thread"]:  # a non-daemon thread: the exit waits for it
        threading.Thread(target=_late_line).start()
    if sys.argv[1:2] == ["sleep"]:
        sys.stdout.flush()
        time.sleep(60)


def _late_line() -> None:
    time.sleep(0.3)
    print("thread done")


if __name__ == "__main__":
    main()
