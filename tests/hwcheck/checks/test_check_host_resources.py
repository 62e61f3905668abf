"""``host_resources``: the model's and the state dir's filesystems, and RAM for the profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hwcheck.model import RigProfile, Severity
from hwcheck.resources import FilesystemRoom, HostResources, read_resources
from tests.support.cards import make_input, results_for

GIB = 1024


def judged(
    resources: HostResources | None, profile: RigProfile | None = None
) -> list[tuple[Severity, str]]:
    inp = make_input(resources=resources, profile=profile)
    return [(r.severity, r.message) for r in results_for(inp, "host_resources")]


@pytest.mark.parametrize(
    ("free_mib", "severity"),
    [(500 * GIB, Severity.OK), (150 * GIB, Severity.WARNING), (30 * GIB, Severity.CRITICAL)],
)
def test_a_filling_filesystem_warns_then_is_critical(free_mib: int, severity: Severity) -> None:
    room = FilesystemRoom("model", "/models/DeepSeek-V4-Flash", 2048 * GIB, free_mib)
    ((found, message),) = judged(HostResources((room,)))
    assert found is severity
    assert message.startswith("model (/models/DeepSeek-V4-Flash): ")


def test_the_remedy_names_the_path_and_limits_come_from_the_config() -> None:
    room = FilesystemRoom("state dir", "/var/lib/cmpfleet", 100 * GIB, 15 * GIB)
    loose = RigProfile(disk_free_warn_pct=5, disk_free_crit_pct=1)
    assert judged(HostResources((room,)), loose)[0][0] is Severity.OK
    inp = make_input(resources=HostResources((room,)))
    (result,) = results_for(inp, "host_resources")
    assert result.severity is Severity.OK  # 15% free: above the default 10%
    tight = make_input(resources=HostResources((room,)), profile=RigProfile(disk_free_warn_pct=20))
    (warned,) = results_for(tight, "host_resources")
    assert warned.severity is Severity.WARNING and "/var/lib/cmpfleet" in warned.remedy


def test_ram_short_for_the_profile_warns() -> None:
    short = HostResources((), memory_total_mib=32 * GIB, ram_needed_mib=44 * GIB)
    ((severity, message),) = judged(short)
    assert severity is Severity.WARNING
    assert "needs about 44 GiB: short by 12 GiB" in message
    enough = HostResources((), memory_total_mib=256 * GIB, ram_needed_mib=44 * GIB)
    assert judged(enough)[0][0] is Severity.OK


def test_nothing_read_is_no_result() -> None:
    assert judged(None) == []


def test_the_reader_names_each_filesystem_once_and_reads_meminfo(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       65842364 kB\nMemAvailable:   51234000 kB\n")
    model = tmp_path / "models" / "not-there-yet"  # its nearest existing parent is measured
    found = read_resources(
        [("state dir", tmp_path), ("model", model)], 20 * GIB, proc_root=tmp_path
    )
    assert [room.label for room in found.filesystems] == ["state dir"]  # the same filesystem
    assert found.memory_total_mib == 65842364 // 1024
    assert found.memory_available_mib == 51234000 // 1024
    fs = os.statvfs(tmp_path)
    assert found.filesystems[0].total_mib == fs.f_blocks * fs.f_frsize // (1024 * 1024)
