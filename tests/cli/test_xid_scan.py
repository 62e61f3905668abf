"""``fleetctl xid scan`` on saved kernel logs of every format."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from tests.support.cli import one_clean_line
from tests.support.cli import run_fleetctl as fleetctl
from tests.support.external import require_root
from tests.support.nodes import KINDS, make_node

DATA = Path(__file__).resolve().parents[1] / "kernellog" / "data"


@pytest.mark.parametrize("name", ["dmesg.log", "dmesg-T.log", "journalctl-k.log", "kmsg.log"])
def test_scan_each_format_lists_the_xids_with_line_numbers(name: str) -> None:
    path = DATA / name
    result = fleetctl("xid", "scan", str(path), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    lines = path.read_text().splitlines()
    # kmsg continuation lines (leading space) carry KEY=value data, never a record; a kmsg
    # record at a user facility (prio >> 3 != 0) was written from user space: not an Xid
    expected = [
        n
        for n, line in enumerate(lines, 1)
        if "NVRM: Xid (" in line
        and not line.startswith(" ")
        and not (name == "kmsg.log" and int(line.split(",", 1)[0]) >> 3 != 0)
    ]
    assert [f["line"] for f in found] == expected
    for item in found:
        assert set(item) >= {
            "line",
            "text",
            "pci_bus_id",
            "xid",
            "pid",
            "process",
            "message",
            "class",
            "action",
        }
        assert item["text"] == lines[item["line"] - 1]
        assert item["class"] in {"application", "hardware", "driver", "unknown"}
        assert item["action"] in {"none", "restart_engine", "reboot", "cold_power_cycle", "inspect"}


def test_stdin_and_classes() -> None:
    log = (
        "[  10.000001] NVRM: Xid (PCI:0000:01:00): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. MMU Fault\n"
        "[  11.000001] some other line mentioning 0x31 and Xid 31\n"
        "[  12.000001] NVRM: Xid (PCI:0000:21:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception\n"
    )
    result = fleetctl("--json", "xid", "scan", "-", stdin=log)
    found = json.loads(result.stdout)
    assert [(f["line"], f["xid"], f["pci_bus_id"], f["class"]) for f in found] == [
        (1, 31, "0000:01:00.0", "hardware"),
        (3, 13, "0000:21:00.0", "application"),
    ]
    assert found[0]["pid"] == 4242 and found[0]["process"] == "python3"
    assert found[1]["pid"] is None and found[1]["process"] is None


def test_override_from_config(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[xid.31]\nclass = "application"\naction = "restart_engine"\n')
    line = "NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x, MMU Fault\n"
    found = json.loads(
        fleetctl("xid", "scan", "-", "--config", str(config), "--json", stdin=line).stdout
    )
    assert (found[0]["class"], found[0]["action"]) == ("application", "restart_engine")


def test_human_output_and_empty_input() -> None:
    result = fleetctl("xid", "scan", str(DATA / "dmesg.log"))
    assert result.returncode == 0
    assert "Xid event(s)" in result.stdout
    empty = fleetctl("xid", "scan", "-", stdin="nothing here\n")
    assert empty.returncode == 0
    assert "no Xid events" in empty.stdout


def test_missing_file_and_directory_are_one_line(tmp_path: Path) -> None:
    missing = fleetctl("xid", "scan", str(tmp_path / "nope.log"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"fleetctl: {tmp_path / 'nope.log'}: no such file"
    directory = fleetctl("xid", "scan", str(tmp_path), "--json")
    assert directory.returncode == 2
    assert json.loads(directory.stdout) == {
        "error": f"{tmp_path}: is a directory, expected a saved kernel log",
        "exit_code": 2,
    }
    assert len(directory.stderr.strip().splitlines()) == 1


@pytest.mark.root
def test_scan_of_dev_kmsg_counts_only_the_kernels_records() -> None:
    """/dev/kmsg never ends: the scan reads it without blocking, exits, and skips what a
    process wrote there (user facility), and a saved copy of the same record alike (issue 45)."""
    require_root("writes a user-facility record to /dev/kmsg")
    tag = f"cmpfleet-scan-{uuid.uuid4()}"
    text = f"NVRM: Xid (PCI:0000:fd:00): 79, pid=1, name={tag}, GPU has fallen off the bus."
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    try:
        os.write(fd, f"<14>{text}\n".encode())  # user.info: never a kernel-facility record
    finally:
        os.close(fd)
    result = fleetctl("xid", "scan", "/dev/kmsg", "--json")
    assert result.returncode == 0, result.stderr
    assert [f for f in json.loads(result.stdout) if f["process"] == tag] == []
    saved = fleetctl("xid", "scan", "-", "--json", stdin=f"14,1,2,-;{text}\n")
    assert json.loads(saved.stdout) == []
    assert saved.stderr.strip() == "1 line quoted an Xid from user space: ignored"


@pytest.mark.parametrize("kind", ["fifo", "char-device", "socket"])
def test_a_node_that_would_block_or_never_end_is_one_line(tmp_path: Path, kind: str) -> None:
    """``xid scan /dev/zero`` read forever and ``xid scan FIFO`` blocked (issue 33)."""
    node = make_node(kind, tmp_path / "kern.log")
    result = fleetctl("xid", "scan", str(node))
    assert result.returncode == 2
    line = one_clean_line(result.stderr)
    assert line == f"fleetctl: {node}: is {KINDS[kind]}, expected a saved kernel log"
