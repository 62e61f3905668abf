"""Holders of /dev/nvidia*: a recorded /proc tree replayed, and the real /proc."""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from hwcheck.holders import find_device_holders, scan_device_holders
from hwcheck.model import DeviceHolder
from tests.support.external import require_root

DATA = Path(__file__).parents[1] / "data" / "proc-holders"
XORG_CMD = "/usr/lib/xorg/Xorg -nolisten tcp :0 vt1"


class RecordedProcess:
    """A psutil.Process stand-in answering from a recorded /proc/<pid> directory."""

    def __init__(self, root: Path, pid: int, *, deny: bool = False, gone: bool = False) -> None:
        self._dir = root / str(pid)
        self._pid = pid
        self._deny = deny
        self._gone = gone

    @property
    def pid(self) -> int:
        return self._pid

    def _check(self) -> None:
        if self._gone:
            raise psutil.NoSuchProcess(self._pid)
        if self._deny:
            raise psutil.AccessDenied(self._pid)

    def name(self) -> str:
        self._check()
        return (self._dir / "comm").read_text().strip()

    def cmdline(self) -> list[str]:
        self._check()
        return (self._dir / "cmdline").read_bytes().decode().rstrip("\0").split("\0")


def materialise_proc(dest: Path) -> Path:
    """Copy the recorded tree and turn each fds.txt into real fd/N symlinks."""
    root = dest / "proc"
    shutil.copytree(DATA, root)
    for listing in root.glob("*/fds.txt"):
        fd_dir = listing.parent / "fd"
        fd_dir.mkdir()
        for line in listing.read_text().splitlines():
            number, target = line.split(" ", 1)
            (fd_dir / number).symlink_to(target)
    return root


def recorded_iter(root: Path, **special: dict[str, bool]) -> Iterator[RecordedProcess]:
    for pid in sorted(int(p.name) for p in root.iterdir()):
        yield RecordedProcess(root, pid, **special.get(str(pid), {}))


@pytest.fixture
def proc_root(tmp_path: Path) -> Path:
    return materialise_proc(tmp_path)


def test_recorded_tree_finds_every_holder(proc_root: Path) -> None:
    holders = find_device_holders(
        process_iter=lambda: recorded_iter(proc_root), proc_root=proc_root
    )

    assert [(h.pid, h.name, h.device) for h in holders] == [
        (1234, "Xorg", "/dev/nvidia-modeset"),
        (1234, "Xorg", "/dev/nvidia0"),
        (1234, "Xorg", "/dev/nvidiactl"),
        (2345, "sunshine", "/dev/nvidia-uvm"),
        (2345, "sunshine", "/dev/nvidia1"),
        (3456, "python3", "/dev/nvidia-uvm"),
        (3456, "python3", "/dev/nvidia0"),
        (3456, "python3", "/dev/nvidiactl"),
        (5678, "nvidia-persiste", "/dev/nvidia2"),
        (5678, "nvidia-persiste", "/dev/nvidia3"),
        (5678, "nvidia-persiste", "/dev/nvidiactl"),
    ]
    assert holders[0].cmdline == XORG_CMD


def test_engine_pids_are_excluded(proc_root: Path) -> None:
    holders = find_device_holders(
        process_iter=lambda: recorded_iter(proc_root),
        proc_root=proc_root,
        exclude_pids=[3456, 5678],
    )

    assert sorted({h.pid for h in holders}) == [1234, 2345]


def test_our_own_pid_is_skipped(proc_root: Path) -> None:
    own = proc_root / str(os.getpid())
    shutil.copytree(proc_root / "1234", own, symlinks=True)

    holders = find_device_holders(
        process_iter=lambda: recorded_iter(proc_root), proc_root=proc_root
    )

    assert os.getpid() not in {h.pid for h in holders}
    assert 1234 in {h.pid for h in holders}


def test_a_narrower_glob_matches_only_those_nodes(proc_root: Path) -> None:
    holders = find_device_holders(
        dev_glob="/dev/nvidia-uvm",
        process_iter=lambda: recorded_iter(proc_root),
        proc_root=proc_root,
    )

    assert [(h.pid, h.device) for h in holders] == [
        (2345, "/dev/nvidia-uvm"),
        (3456, "/dev/nvidia-uvm"),
    ]


def test_access_denied_and_vanished_processes_are_tolerated(proc_root: Path) -> None:
    def processes() -> Iterator[RecordedProcess]:
        yield from recorded_iter(proc_root, **{"1234": {"deny": True}, "2345": {"gone": True}})
        yield RecordedProcess(proc_root, 99999)  # exited before its fd dir was read

    scan = scan_device_holders(process_iter=processes, proc_root=proc_root)

    xorg = [h for h in scan.holders if h.pid == 1234]
    assert xorg[0] == DeviceHolder(1234, "?", "/dev/nvidia-modeset", "")
    assert {h.name for h in scan.holders if h.pid == 2345} == {"?"}
    assert 99999 not in {h.pid for h in scan.holders}
    assert scan.unreadable == []


def test_unreadable_fd_dir_is_reported_in_one_warning(
    proc_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fd_dir = proc_root / "2345" / "fd"
    shutil.rmtree(fd_dir)
    fd_dir.write_text("not a directory")

    with caplog.at_level(logging.WARNING, logger="hwcheck.holders"):
        holders = find_device_holders(
            process_iter=lambda: recorded_iter(proc_root), proc_root=proc_root
        )

    assert 2345 not in {h.pid for h in holders}
    assert 1234 in {h.pid for h in holders}
    [record] = caplog.records
    assert "1 process(es)" in record.getMessage()
    assert "Not a directory" in record.getMessage()
    assert "pids 2345" in record.getMessage()


def _wait_for_line(proc: subprocess.Popen[str], deadline_s: float) -> str:
    """The child's first stdout line, waiting at most until ``deadline_s`` (monotonic)."""
    assert proc.stdout is not None
    remaining = deadline_s - time.monotonic()
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, remaining))
    assert ready, "child did not report in time"
    return proc.stdout.readline().strip()


HOLDER_CHILD = (
    "import sys\nheld = open(sys.argv[1])\nprint('holding', flush=True)\nsys.stdin.read()\n"
)


@pytest.fixture
def holding_child(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A real child process holding ``<tmp>/nvidia0`` open until its stdin closes."""
    node = tmp_path.resolve() / "nvidia0"
    node.write_text("")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER_CHILD, str(node)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait_for_line(proc, time.monotonic() + 10.0) == "holding"
        yield proc, node
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def test_real_proc_finds_a_real_child_holding_a_node(
    holding_child: tuple[subprocess.Popen[str], Path],
) -> None:
    proc, node = holding_child
    with node.open():  # this test process holds it too, and must not be listed
        holders = find_device_holders(dev_glob=f"{node.parent}/nvidia*")

    assert [(h.pid, h.device) for h in holders] == [(proc.pid, str(node))]
    assert "python" in holders[0].name
    assert str(node) in holders[0].cmdline


def test_real_proc_excludes_the_engine_pids(
    holding_child: tuple[subprocess.Popen[str], Path],
) -> None:
    proc, node = holding_child

    holders = find_device_holders(dev_glob=f"{node.parent}/nvidia*", exclude_pids=[proc.pid])

    assert holders == []


@pytest.mark.root
def test_real_proc_unprivileged_scan_reports_what_it_could_not_read() -> None:
    require_root("drops to uid nobody in a forked child to meet 'Permission denied'")
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        code = 1
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            scan = scan_device_holders()
            os.write(write_end, json.dumps(scan.unreadable).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(child, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    unreadable = dict(json.loads(payload))
    assert unreadable.get(os.getpid()) == "Permission denied"
