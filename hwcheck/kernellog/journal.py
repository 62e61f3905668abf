"""Read the kernel log through ``journalctl -k -o json``: the fallback when /dev/kmsg is closed.

journald keeps its own copy of the kernel log, readable by members of ``systemd-journal``
without CAP_SYSLOG, so a non-root daemon still sees Xids. Its entries carry no kernel
sequence number: records from here have ``seq=None`` and resume by the journal's own
``__CURSOR`` (``after_cursor``, and ``journal_cursor`` for the last one seen).
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import tempfile
import uuid
from typing import IO, Any

from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.records import (
    KERNEL_FACILITY,
    USER_FACILITY,
    KernelLogCursor,
    KernelRecord,
)

_LOG = logging.getLogger(__name__)
DEFAULT_JOURNALCTL = "journalctl"
_READ_CHUNK_BYTES = 65536
_STOP_TIMEOUT_S = 5.0


def _find_journalctl(program: str) -> str:
    """The executable's path, or a one-line KernelLogUnavailable naming it."""
    found = shutil.which(program)
    if found is None:
        raise KernelLogUnavailable(
            f"cannot read the kernel log through journald: `{program}` not found on PATH "
            "(install systemd, or run as root to read /dev/kmsg)"
        )
    return found


def normalize_boot_id(raw: str) -> str:
    """journald's ``_BOOT_ID`` (32 hex digits) in /proc's dashed form, so both compare equal."""
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        return raw.strip()


def _message_text(message: object) -> str | None:
    """``MESSAGE`` as text: journald gives a string, or a list of byte values when not UTF-8."""
    if isinstance(message, str):
        return message
    if isinstance(message, list) and all(isinstance(b, int) and 0 <= b <= 255 for b in message):
        return bytes(message).decode("utf-8", errors="replace")
    return None


def _int_field(entry: dict[str, Any], key: str) -> int | None:
    value = entry.get(key)
    if isinstance(value, str) and value.isdecimal() and len(value) <= 20:
        return int(value)
    return None


def journal_facility(entry: dict[str, Any]) -> int | None:
    """The entry's syslog facility: ``SYSLOG_FACILITY``, else what ``_TRANSPORT`` implies.

    journald copies records a process wrote into /dev/kmsg with ``_TRANSPORT=kernel`` too,
    but keeps their facility; an entry of another transport is never the kernel's.
    """
    facility = _int_field(entry, "SYSLOG_FACILITY")
    if facility is not None:
        return facility
    transport = entry.get("_TRANSPORT")
    if transport == "kernel":
        return KERNEL_FACILITY
    return None if transport is None else USER_FACILITY


def parse_journal_entry(line: str, default_boot_id: str | None) -> tuple[KernelRecord, str | None]:
    """One ``-o json`` line as a record plus its ``__CURSOR``; ValueError when it is not one."""
    entry = json.loads(line)
    if not isinstance(entry, dict):
        raise ValueError("journal entry is not a JSON object")
    text = _message_text(entry.get("MESSAGE"))
    if text is None:
        raise ValueError("journal entry has no MESSAGE text")
    raw_boot = entry.get("_BOOT_ID")
    boot_id = normalize_boot_id(raw_boot) if isinstance(raw_boot, str) else default_boot_id
    usec = _int_field(entry, "_SOURCE_MONOTONIC_TIMESTAMP")
    if usec is None:
        usec = _int_field(entry, "__MONOTONIC_TIMESTAMP")
    cursor = entry.get("__CURSOR")
    record = KernelRecord(
        text=text.rstrip("\n"),
        seq=None,
        boot_id=boot_id,
        timestamp_usec=usec,
        raw=line,
        facility=journal_facility(entry),
    )
    return record, cursor if isinstance(cursor, str) else None


def follow_argv(program: str, after_cursor: str | None, from_start: bool) -> list[str]:
    """The ``journalctl`` argv: after a journal cursor, this whole boot, or from now on."""
    argv = [program, "-k", "-f", "-o", "json", "--no-pager"]
    if after_cursor is not None:
        return [*argv, "--after-cursor", after_cursor, "--no-tail"]
    if from_start:
        return [*argv, "-b", "--no-tail"]
    return [*argv, "-b", "-n", "0"]


class JournalctlSource:
    """A ``KernelLogSource`` reading a ``journalctl -k -f -o json`` child through a pipe.

    ``after_cursor`` (a journald ``__CURSOR``) resumes exactly. A ``KernelLogCursor`` holds
    no journal cursor, so with one (and no ``after_cursor``) the whole boot is read again:
    nothing is lost, and consumers tell repeats apart by ``(boot_id, timestamp_usec, text)``.
    Without either, ``from_start`` chooses this boot's history or only new records.
    """

    name = "journal"

    def __init__(
        self,
        *,
        boot_id: str,
        cursor: KernelLogCursor | None = None,
        after_cursor: str | None = None,
        from_start: bool = False,
        journalctl: str = DEFAULT_JOURNALCTL,
    ) -> None:
        self.boot_id = boot_id
        program = _find_journalctl(journalctl)
        self.argv = follow_argv(program, after_cursor, from_start or cursor is not None)
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except OSError as exc:
            self._stderr.close()
            raise KernelLogUnavailable(f"cannot start {program}: {exc.strerror or exc}") from None
        if self._process.stdout is None:  # cannot happen with stdout=PIPE; keeps mypy honest
            raise KernelLogUnavailable(f"cannot read the output of {program}")
        self._fd = self._process.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._partial = b""
        self._ended = False
        self._journal_cursor = after_cursor
        self._malformed = 0

    @property
    def lost_records(self) -> int:
        """journald does not report overwritten kernel records: always 0."""
        return 0

    @property
    def journal_cursor(self) -> str | None:
        """The ``__CURSOR`` of the last record returned (persist it to resume exactly)."""
        return self._journal_cursor

    @property
    def malformed_lines(self) -> int:
        """Output lines that were not journal entries with a MESSAGE (each logged)."""
        return self._malformed

    def _exit_reason(self) -> str:
        """How the child ended, with the last line it wrote to stderr."""
        code = None
        if self._process is not None:
            try:
                code = self._process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", errors="replace").strip().splitlines()
        detail = f": {lines[-1]}" if lines else ""
        return f"{self.argv[0]} exited with status {code}{detail}"

    def _parse_lines(self, chunk: bytes) -> list[KernelRecord]:
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        records: list[KernelRecord] = []
        for raw in complete:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                record, cursor = parse_journal_entry(line, self.boot_id)
            except ValueError as exc:
                self._malformed += 1
                _LOG.warning("skipping a journalctl line that is not an entry: %s", exc)
                continue
            records.append(record)
            if cursor is not None:
                self._journal_cursor = cursor
        return records

    def read_available(self) -> list[KernelRecord]:
        """Every complete entry the child has printed so far; never blocks.

        Raises KernelLogUnavailable once the child has exited and its output is consumed:
        ``journalctl -f`` only ends when it fails.
        """
        if self._process is None:
            raise KernelLogUnavailable("cannot read the journal: the source is closed")
        if self._ended:
            raise KernelLogUnavailable(f"kernel log unavailable: {self._exit_reason()}")
        records: list[KernelRecord] = []
        while True:
            try:
                chunk = os.read(self._fd, _READ_CHUNK_BYTES)
            except BlockingIOError:
                break
            if not chunk:
                self._ended = True
                records.extend(self._parse_lines(b"\n"))
                break
            records.extend(self._parse_lines(chunk))
        if self._ended and not records:
            raise KernelLogUnavailable(f"kernel log unavailable: {self._exit_reason()}")
        return records

    def wait(self, timeout_s: float) -> bool:
        """Block until the pipe is readable (True) or ``timeout_s`` passed (False)."""
        if self._process is None or self._ended:
            return True
        readable, _, _ = select.select([self._fd], [], [], max(0.0, timeout_s))
        return bool(readable)

    def close(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after 5 s) and close its pipes; idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()
        self._stderr.close()


def journal_history(
    boot_id: str,
    journalctl: str = DEFAULT_JOURNALCTL,
    timeout_s: float = 60.0,
) -> list[KernelRecord]:
    """This boot's kernel log so far, from ``journalctl -k -b -o json`` (one shot)."""
    program = _find_journalctl(journalctl)
    argv = [program, "-k", "-b", "-o", "json", "--no-pager"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise KernelLogUnavailable(f"{program} -k -b did not finish in {timeout_s:g} s") from None
    except OSError as exc:
        raise KernelLogUnavailable(f"cannot start {program}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        detail = f": {lines[-1]}" if lines else ""
        raise KernelLogUnavailable(f"{program} -k -b exited with status {done.returncode}{detail}")
    records: list[KernelRecord] = []
    for raw in done.stdout.decode("utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line:
            continue
        try:
            record, _ = parse_journal_entry(line, boot_id)
        except ValueError as exc:
            _LOG.warning("skipping a journalctl line that is not an entry: %s", exc)
            continue
        records.append(record)
    return records
