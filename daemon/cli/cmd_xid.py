"""``fleetctl xid scan``: list the Xids in a saved kernel log."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from daemon.cli.output import EXIT_BAD_INPUT, Output
from daemon.config import ConfigError, load_cli_settings, xid_catalogue
from hwcheck.bootid import read_boot_id
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.history import read_kmsg_history
from hwcheck.kernellog.parser import scan_lines


def _lines(stream: TextIO) -> Iterator[str]:
    for line in stream:
        yield line.rstrip("\n")


def scan_document(stream: TextIO, catalogue: XidCatalogue) -> list[dict[str, Any]]:
    """CONTRACT's list of ``{line, text, pci_bus_id, xid, pid, process, message, class, action}``."""
    found: list[dict[str, Any]] = []
    for event in scan_lines(_lines(stream)):
        info = catalogue.classify(event)
        found.append(
            {
                "line": event.line,
                "text": event.text,
                "pci_bus_id": event.pci_bus_id,
                "xid": event.xid,
                "pid": event.pid,
                "process": event.process,
                "message": event.message,
                "class": info.xid_class.value,
                "action": info.action.value,
                "explanation": info.explanation,
            }
        )
    return found


def scan(out: Output, file: str, config: Path | None) -> int:
    """Scan ``file`` (``-`` for stdin); 0 on success, 2 with one line on bad input."""
    try:
        catalogue = xid_catalogue(load_cli_settings(config))
    except ConfigError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    try:
        if file != "-" and Path(file).is_char_device():
            # /dev/kmsg never ends: read what the kernel holds now, without blocking.
            # As on the live path, only the kernel's own records: a saved log is read as
            # given, but here the facility says who wrote each record.
            records = read_kmsg_history(file, boot_id=read_boot_id())
            lines = "".join(
                (r.raw or r.text).split("\n", 1)[0] + "\n" for r in records if not r.from_user_space
            )
            found = scan_document(io.StringIO(lines), catalogue)
        elif file == "-":
            stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            found = scan_document(stdin, catalogue)
        else:
            with open(file, encoding="utf-8", errors="replace") as stream:
                found = scan_document(stream, catalogue)
    except FileNotFoundError:
        out.fail(f"{file}: no such file", EXIT_BAD_INPUT)
    except IsADirectoryError:
        out.fail(f"{file}: is a directory, expected a saved kernel log", EXIT_BAD_INPUT)
    except PermissionError:
        out.fail(f"{file}: permission denied (try sudo)", EXIT_BAD_INPUT)
    except KernelLogUnavailable as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    if out.json_mode:
        out.emit_json(found)
        return 0
    if not found:
        out.line(f"no Xid events in {file if file != '-' else 'stdin'}")
        return 0
    out.table(
        f"{len(found)} Xid event(s)",
        ["line", "pci", "xid", "class", "action", "process", "message"],
        [
            [
                str(f["line"]),
                f["pci_bus_id"] or "?",
                str(f["xid"]),
                f["class"],
                f["action"],
                f["process"] or "-",
                f["message"],
            ]
            for f in found
        ],
    )
    return 0
