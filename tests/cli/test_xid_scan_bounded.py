"""``xid scan -`` reads its input a bounded line at a time (issue 36).

Input with no newline grew one line without bound (7 GB) and ignored Ctrl-C. Lines are
now cut at ``MAX_LINE_BYTES`` and read in pieces: memory stays small, Xids after the
giant line are found, and their line numbers are the input's.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

from daemon.cli.rig.xid import MAX_LINE_BYTES, bounded_lines

XID = b"[  12.000001] NVRM: Xid (PCI:0000:21:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"


def test_an_over_long_line_is_cut_and_the_next_lines_kept() -> None:
    raw = io.BytesIO(b"a" * (3 * 1000 + 5) + b"\nshort\n" + b"b" * 1000 + b"\nlast")
    lines = list(bounded_lines(raw, max_line_bytes=1000))
    assert lines == ["a" * 1000, "short", "b" * 1000, "last"]


def test_a_stdin_with_no_newline_stays_small_and_finds_the_xid_after_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "daemon.fleetctl", "--json", "xid", "scan", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    block = b"\0" * (1024 * 1024)
    for _ in range(256):  # 256 MiB on one line (a pipe: each write waits for the reader)
        proc.stdin.write(block)
    proc.stdin.flush()
    # The reader's peak so far, while it still waits for the line's end (VmHWM: since its
    # exec; the rusage of a child would count the test process's own peak from the fork).
    status_text = Path(f"/proc/{proc.pid}/status").read_text()
    peak_kib = int(re.search(r"VmHWM:\s+(\d+)", status_text).group(1))  # type: ignore[union-attr]
    proc.stdin.write(b"\n" + XID)
    proc.stdin.close()
    proc.wait(120)
    reader.join(30)
    errors = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0, errors
    found = json.loads(out[0])
    assert [(row["line"], row["xid"]) for row in found] == [(2, 79)]
    assert peak_kib < 150 * 1024, f"peak {peak_kib} KiB while reading a 256 MiB line"
    assert MAX_LINE_BYTES <= 1024 * 1024
