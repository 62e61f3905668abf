"""``fleetctl xid scan`` on an Xid storm: summary first, JSON streamed, memory bounded."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hwcheck.kernellog.kmsg_format import format_xid_text

REPO_ROOT = Path(__file__).resolve().parents[2]
STORM_LINES = 50_000
PEAK_RSS_LIMIT_MB = 100  # the bound, whatever the input (the old scan took ~370 MB)
CARDS = ("0000:01:00.0", "0000:21:00.0", "0000:41:00.0")


@pytest.fixture(scope="module")
def storm_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wedged rig's syslog: every line an Xid 31 or 13, cycling over three cards."""
    path = tmp_path_factory.mktemp("storm") / "kern.log"
    with path.open("w", encoding="utf-8") as out:
        for number in range(STORM_LINES):
            xid = 31 if number % 2 == 0 else 13  # the test counts them the same way
            text = format_xid_text(CARDS[number % 3], xid, "MMU Fault", 13641, "python3")
            out.write(f"[{10 + number * 0.001:12.6f}] {text}\n")
    return path


# A small parent for fleetctl: a child's peak RSS includes its parent's at fork time (the
# kernel keeps the high-water mark across exec), so pytest's own memory must not be its parent.
MEASURE = """
import os, subprocess, sys
out, err, *argv = sys.argv[1:]
with open(out, "wb") as sink, open(err, "wb") as errors:
    child = subprocess.Popen(argv, stdout=sink, stderr=errors)
    _, status, usage = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
print(child.returncode, usage.ru_maxrss)
"""


def scan(path: Path, *extra: str) -> tuple[str, float]:
    """Run ``fleetctl xid scan PATH`` to a file; its stdout and peak RSS in MB."""
    out = path.with_suffix(f".out{len(extra)}")
    err = path.with_suffix(f".err{len(extra)}")
    argv = [sys.executable, "-m", "daemon.fleetctl", "xid", "scan", str(path), *extra]
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, str(out), str(err), *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, peak_kib = (int(word) for word in measured.stdout.split())
    assert code == 0, err.read_text()
    return out.read_text(encoding="utf-8"), peak_kib / 1024


def test_human_view_leads_with_the_summary_and_lists_every_line(storm_log: Path) -> None:
    text, peak_mb = scan(storm_log)
    lines = text.splitlines()
    assert lines[0] == (
        f"50,000 Xid event(s) in {storm_log} on 3 card(s): "
        "first line 1 (10.000000 s after boot), last line 50,000 (59.999000 s after boot)"
    )
    summary = [line for line in lines[:12] if line.startswith("0000:")]
    # Plain columns into a pipe (no box drawing): pci, xid, count, ...
    counts = {(row.split()[0], int(row.split()[1])): row.split()[2] for row in summary}
    expected = Counter((CARDS[n % 3], 31 if n % 2 == 0 else 13) for n in range(STORM_LINES))
    assert counts == {key: f"{count:,}" for key, count in expected.items()}
    listed = [line for line in lines if line.strip().split(" ", 1)[0].isdigit()]
    assert len(listed) == STORM_LINES
    assert listed[0].split()[:4] == ["1", "0000:01:00.0", "31", "hardware"]
    assert peak_mb < PEAK_RSS_LIMIT_MB, f"peak RSS {peak_mb:.0f} MB"


def test_json_is_the_contract_list_streamed(storm_log: Path) -> None:
    text, peak_mb = scan(storm_log, "--json")
    found = json.loads(text)
    assert len(found) == STORM_LINES
    assert [f["line"] for f in found[:3]] == [1, 2, 3]
    assert set(found[-1]) >= {"line", "text", "pci_bus_id", "xid", "pid", "process", "message"}
    assert (found[-1]["class"], found[-1]["action"]) == ("application", "restart_engine")
    assert peak_mb < PEAK_RSS_LIMIT_MB, f"peak RSS {peak_mb:.0f} MB"


def test_empty_json_is_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "quiet.log"
    path.write_text("[    1.000000] nothing to see\n")
    assert json.loads(scan(path, "--json")[0]) == []
