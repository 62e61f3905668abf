"""``fleetctl xid scan``: list the Xids in a saved kernel log, in constant memory.

A wedged rig's syslog can hold hundreds of thousands of Xid lines, so nothing here keeps
the events: JSON is streamed as the documented array one element at a time, and the human
view keeps only the per-card, per-Xid summary in memory while the lines it lists wait in
a temporary file (the summary leads, and it is only known at the end of the input).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, TextIO

from daemon.cli.output import EXIT_BAD_INPUT, Output
from daemon.config import ConfigError, load_cli_settings, xid_catalogue
from hwcheck.atomic import NotARegularFile
from hwcheck.bootid import read_boot_id
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.history import read_kmsg_history
from hwcheck.kernellog.origin import read_log_line
from hwcheck.kernellog.parser import XID_PREFIX, parse_xid
from hwcheck.model import XidEvent
from hwcheck.regular_file import open_regular

# Where a saved kernel log says when a line was printed, by format. Numbers are ASCII
# decimal digits (``re.ASCII``: ``\d`` alone takes any script's) in bounded runs, so a
# hostile line never reaches int() with thousands of digits.
_BOOT_CLOCK_RES = (
    re.compile(r"^\d{1,10},\d{1,20},(?P<usec>\d{1,20}),[^;]*;", re.ASCII),  # /dev/kmsg
    re.compile(r"^\[\s*(?P<secs>\d{1,12}\.\d{1,9})\]", re.ASCII),  # dmesg: [  10.000001]
)
_WALL_CLOCK_RES = (
    re.compile(
        r"^\[(?P<stamp>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]", re.ASCII
    ),
    re.compile(
        r"^(?P<stamp>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)",
        re.ASCII,
    ),
    re.compile(r"^(?P<stamp>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)", re.ASCII),  # syslog
)
JSON_BATCH_ROWS = 512
# The kernel's ring buffer device, /dev/kmsg: character device major 1, minor 11.
KMSG_DEVICE = (1, 11)
_LISTING_HEADER = ("line", "pci", "xid", "class", "action", "process", "message")


MAX_LINE_BYTES = 64 * 1024  # a kernel log line is at most a few KiB


def line_time(text: str) -> str | None:
    """When the line says it was printed: seconds since boot, or its wall-clock stamp."""
    for pattern in _BOOT_CLOCK_RES:
        match = pattern.match(text)
        if match is not None:
            usec = match.groupdict().get("usec")
            seconds = int(usec) / 1_000_000 if usec is not None else float(match.group("secs"))
            return f"{seconds:.6f} s after boot"
    for pattern in _WALL_CLOCK_RES:
        match = pattern.match(text)
        if match is not None:
            return match.group("stamp")
    return None


def _lines(stream: Iterable[str]) -> Iterator[str]:
    for line in stream:
        yield line.rstrip("\n")


@dataclass
class ScanTally:
    """What a scan set aside: lines that quoted an Xid but were written from user space."""

    user_space: int = 0

    def note(self) -> str | None:
        """``N lines quoted an Xid from user space: ignored`` (``None`` when there were none)."""
        if self.user_space == 0:
            return None
        lines = "line" if self.user_space == 1 else "lines"
        return f"{self.user_space:,} {lines} quoted an Xid from user space: ignored"


def scan_events(stream: Iterable[str], tally: ScanTally) -> Iterator[XidEvent]:
    """The kernel's Xid events in ``stream``, with 1-based line numbers.

    Each line's writer is read by ``read_log_line``, the same reading as the daemon's
    sources: a line a process wrote (a user facility, a ``NAME[PID]:`` identifier) that
    quotes an Xid is counted in ``tally`` and never reported. ``text`` stays the input line.
    """
    for number, line in enumerate(_lines(stream), start=1):
        if XID_PREFIX not in line:
            continue
        record = read_log_line(line)
        event = parse_xid(record.text, number)
        if event is None:
            continue
        if record.from_user_space:
            tally.user_space += 1
            continue
        if event.text != line:  # a kmsg record's text or a journal entry's MESSAGE
            seq = record.seq if record.seq is not None else event.seq
            event = replace(event, text=line, seq=seq)
        yield event


def scan_rows(
    stream: Iterable[str], catalogue: XidCatalogue, tally: ScanTally | None = None
) -> Iterator[dict[str, Any]]:
    """``{line, text, pci_bus_id, xid, pid, process, message, class, action}`` rows, lazily."""
    for event in scan_events(stream, tally if tally is not None else ScanTally()):
        info = catalogue.classify(event)
        yield {
            "line": event.line,
            "text": event.text,
            "pci_bus_id": event.pci_bus_id,
            "xid": event.xid,
            "pid": event.pid,
            "process": event.process,
            "message": event.message,
            "class": info.xid_class.value,
            "action": info.action.value,
            "title": info.title,  # the explanation, once: fleetctl explain xid N
        }


def scan_document(stream: TextIO, catalogue: XidCatalogue) -> list[dict[str, Any]]:
    """Every row as one list (for callers that want them all; the CLI streams instead)."""
    return list(scan_rows(stream, catalogue))


@dataclass
class _Group:
    """One card's one Xid in the summary: how often, and the first and last occurrence."""

    count: int
    xid_class: str
    action: str
    first_line: int
    first_text: str
    last_line: int
    last_text: str


class ScanSummary:
    """Counts per card and Xid plus the first and last event: small whatever the input.

    Only line numbers and texts are kept per group; their times are read when printed.
    """

    def __init__(self) -> None:
        self.total = 0
        self.groups: dict[tuple[str, int], _Group] = {}
        self.first: tuple[int, str] | None = None
        self.last: tuple[int, str] | None = None

    def add(self, row: dict[str, Any]) -> None:
        """Count one row."""
        self.total += 1
        line, text = row["line"], row["text"]
        if self.first is None:
            self.first = (line, text)
        self.last = (line, text)
        key = (row["pci_bus_id"] or "?", row["xid"])
        group = self.groups.get(key)
        if group is None:
            self.groups[key] = _Group(1, row["class"], row["action"], line, text, line, text)
        else:
            group.count += 1
            group.last_line, group.last_text = line, text

    def headline(self, name: str) -> str:
        """``N Xid event(s) in NAME on K card(s): first ..., last ...``."""
        cards = len({pci for pci, _ in self.groups})
        text = f"{self.total:,} Xid event(s) in {name} on {cards} card(s)"
        if self.first is not None and self.last is not None:
            text += f": first {_where(*self.first)}, last {_where(*self.last)}"
        return text


def _where(line: int, text: str) -> str:
    """``line N (when)``: the line number and the time the line carries, if any."""
    when = line_time(text)
    return f"line {line:,}" + (f" ({when})" if when else "")


def _listing_line(
    line: object, pci: str, xid: object, xid_class: str, action: str, process: str, message: str
) -> str:
    return (
        f"{line:>8}  {pci:<12}  {xid:>4}  {xid_class:<11}  {action:<16}  {process:<16}  {message}\n"
    )


def _listing_row(row: dict[str, Any]) -> str:
    return _listing_line(
        row["line"],
        row["pci_bus_id"] or "?",
        row["xid"],
        row["class"],
        row["action"],
        row["process"] or "-",
        row["message"],
    )


def write_json(rows: Iterable[dict[str, Any]], out: IO[str]) -> None:
    """The rows as one JSON array, written a bounded batch of elements at a time.

    One ``encode`` per batch, not per row: the per-call cost was a third of a storm's time.
    """
    encode = json.JSONEncoder(default=str).encode
    out.write("[")
    separator = "\n"
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == JSON_BATCH_ROWS:
            out.write(separator + encode(batch)[1:-1])
            separator, batch = ",\n", []
    if batch:
        out.write(separator + encode(batch)[1:-1])
        separator = ",\n"
    out.write("\n]\n" if separator != "\n" else "]\n")
    out.flush()


def write_human(rows: Iterable[dict[str, Any]], name: str, out: Output) -> None:
    """The summary first (per card and Xid, first and last), then every line, plainly."""
    summary = ScanSummary()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        for row in rows:
            summary.add(row)
            spool.write(_listing_row(row))
        if summary.total == 0:
            out.line(f"no Xid events in {name}")
            return
        out.line(summary.headline(name))
        out.table(
            "per card and Xid",
            ["pci", "xid", "count", "class", "action", "first", "last"],
            [
                [
                    pci,
                    str(xid),
                    f"{g.count:,}",
                    g.xid_class,
                    g.action,
                    _where(g.first_line, g.first_text),
                    _where(g.last_line, g.last_text),
                ]
                for (pci, xid), g in sorted(summary.groups.items())
            ],
        )
        out.line("")
        sys.stdout.flush()
        stdout = sys.stdout
        stdout.write(_listing_line(*_LISTING_HEADER))
        spool.seek(0)
        for line in spool:
            stdout.write(line)
        stdout.flush()


def bounded_lines(raw: IO[bytes], max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of ``raw``, each cut at ``max_line_bytes`` (the rest of it skipped).

    Input with no newline (``head -c 7G /dev/zero | fleetctl xid scan -``) grew one line
    without bound, 7 GB, and only a kill ended it (issue 36). Every line is read in pieces
    of at most ``max_line_bytes`` (Ctrl-C is seen between them); a kernel log line is far
    shorter, so no Xid is lost, and the line numbers stay those of the input.
    """
    while line := raw.readline(max_line_bytes):
        if not line.endswith(b"\n") and len(line) == max_line_bytes:
            while (rest := raw.readline(max_line_bytes)) and not rest.endswith(b"\n"):
                pass  # the rest of an over-long line: read, not kept
        yield line.decode("utf-8", errors="replace").rstrip("\n")


def _open_input(file: str) -> tuple[Iterable[str], IO[bytes] | None]:
    """The lines to scan and the stream to close after (None when nothing is to be closed)."""
    if file == "-":
        stdin = open(sys.stdin.fileno(), "rb", closefd=False)  # noqa: SIM115
        return bounded_lines(stdin), stdin
    if is_kmsg_device(Path(file)):
        # /dev/kmsg never ends: read what the kernel holds now, without blocking. Records a
        # process wrote keep their facility in the prefix: counted apart, as in a saved dump.
        records = read_kmsg_history(file, boot_id=read_boot_id())
        lines = [(r.raw or r.text).split("\n", 1)[0] for r in records]
        return lines, None
    # Any other device, a FIFO or a socket would block or never end: refused in one line.
    stream = open_regular(file)
    return bounded_lines(stream), stream


def is_kmsg_device(path: Path) -> bool:
    """True for the kernel's ring buffer device (``/dev/kmsg`` or a node of the same device)."""
    try:
        info = path.stat()
    except OSError:
        return False
    rdev = info.st_rdev
    return stat.S_ISCHR(info.st_mode) and (os.major(rdev), os.minor(rdev)) == KMSG_DEVICE


def scan(out: Output, file: str, config: Path | None) -> int:
    """Scan ``file`` (``-`` for stdin); 0 on success, 2 with one line on bad input."""
    try:
        catalogue = xid_catalogue(load_cli_settings(config))
    except ConfigError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    try:
        lines, to_close = _open_input(file)
    except FileNotFoundError:
        out.fail(f"{file}: no such file", EXIT_BAD_INPUT)
    except NotARegularFile as exc:
        out.fail(f"{file}: is {exc.what}, expected a saved kernel log", EXIT_BAD_INPUT)
    except PermissionError:
        out.fail(f"{file}: permission denied (try sudo)", EXIT_BAD_INPUT)
    except KernelLogUnavailable as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    except OSError as exc:
        out.fail(f"{file}: cannot read: {exc.strerror or exc}", EXIT_BAD_INPUT)
    tally = ScanTally()
    try:
        rows = scan_rows(lines, catalogue, tally)
        if out.json_mode:
            write_json(rows, sys.stdout)
        else:
            write_human(rows, file if file != "-" else "stdin", out)
    finally:
        if to_close is not None:
            to_close.close()
    note = tally.note()
    if note is not None:
        # JSON keeps the documented list on stdout: the count goes to stderr, one line.
        if out.json_mode:
            print(note, file=sys.stderr, flush=True)
        else:
            out.line(note)
    return 0
