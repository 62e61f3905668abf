"""fleetd answers the supervisor's OOM-killer question from the host's kernel log (issue 44)."""

from __future__ import annotations

from typing import cast

from daemon.engine.service import oom_record_of
from hwcheck.host import HostSources
from hwcheck.kernellog.kmsg_format import parse_kmsg_record
from hwcheck.kernellog.records import KernelRecord

RECORD = "Out of memory: Killed process 4242 (python3) total-vm:81234567kB, anon-rss:1234kB"


class _Host:
    """The one source ``oom_record_of`` reads: this boot's kernel log."""

    def __init__(self, lines: list[str]) -> None:
        self.records = [r for r in (parse_kmsg_record(line) for line in lines) if r is not None]

    def kernel_log_history(self) -> list[KernelRecord]:
        return self.records


def _ask(lines: list[str], *pids: int) -> str | None:
    return oom_record_of(cast(HostSources, _Host(lines)), set(pids))


def test_the_kernels_record_for_the_pid_is_found() -> None:
    lines = ["6,1,10,-;eth0: link up", f"3,2,20,-;{RECORD}"]
    assert _ask(lines, 4242) == RECORD
    assert _ask(lines, 4243) is None
    assert _ask(lines, 4241, 4242) == RECORD  # a worker of the engine's, by its own pid


def test_a_record_written_from_user_space_is_not_the_kernels() -> None:
    assert _ask([f"11,3,30,-;{RECORD}"], 4242) is None  # user.err: echo > /dev/kmsg
