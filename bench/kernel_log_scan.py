"""Benchmark `fleetctl xid scan`'s parser path against `grep -c 'NVRM: Xid'` on one log.

Generates a dmesg-format kernel log (default 1,000,000 lines, 1% Xid lines) in a temp
file, then times, in the same run and on the same file:

- grep: `grep -c 'NVRM: Xid' FILE` as a subprocess (the baseline people use today);
- scan: what `fleetctl xid scan` does: read the file as text line by line,
  `scan_lines` + `XidCatalogue.classify` on every event.

Targets: the `fleetctl xid scan` path under 2 s and within 10x of grep's time.

The storm case is a wedged rig's syslog: every line an Xid (default 100,000). It runs the
real `fleetctl xid scan FILE` as a child, human output and `--json`, each to a file, and
reads the child's wall time and peak RSS (``wait4``). Targets: 2 s and 100 MB each.

Prints figures only; it asserts nothing.
Usage: python bench/kernel_log_scan.py [--lines N] [--storm-lines N] [--storm-only]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.kmsg_format import format_xid_text
from hwcheck.kernellog.parser import scan_lines

TARGET_TOTAL_S = 2.0
TARGET_RATIO = 10.0
REPEATS = 3
STORM_TARGET_S = 2.0
STORM_TARGET_MB = 100.0
REPO_ROOT = Path(__file__).resolve().parent.parent

_OTHER_LINES = (
    "r8169 0000:06:00.0 enp6s0: Link is Up - 1Gbps/Full - flow control rx/tx",
    'audit: type=1400 audit(1727611555.123:42): apparmor="DENIED" operation="open" profile="snap.docker" status 0x31',
    "docker0: port 1(veth3c1a2b4) entered forwarding state",
    "NVRM: GPU at PCI:0000:01:00: GPU-3a7d1b2c-4e5f-6789-abcd-ef0123456789",
    "pcieport 0000:40:01.1: AER: Corrected error message received from 0000:41:00.0",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024",
)
_XIDS = (
    (31, "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"),
    (13, "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address"),
    (79, "GPU has fallen off the bus."),
    (154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
    (43, "Ch 00000008"),
)  # fmt: skip


def generate(path: Path, lines: int, xid_fraction: float, seed: int = 1) -> int:
    """Write the log; returns how many Xid lines it holds."""
    rng = random.Random(seed)
    every = max(1, round(1 / xid_fraction)) if xid_fraction > 0 else 0
    xids = 0
    with path.open("w", encoding="utf-8") as out:
        for number in range(lines):
            stamp = f"[{number * 0.0137:12.6f}] "
            if every and number % every == every - 1:
                xid, message = _XIDS[xids % len(_XIDS)]
                bus = rng.randrange(1, 9)
                text = format_xid_text(f"0000:{bus:02x}:00.0", xid, message, 13641, "python3")
                xids += 1
            else:
                text = _OTHER_LINES[rng.randrange(len(_OTHER_LINES))]
            out.write(stamp + text + "\n")
    return xids


def best_of(run: Callable[[], int]) -> tuple[float, int]:
    """Best wall time (monotonic) of ``REPEATS`` runs and the count the run returned."""
    best = float("inf")
    count = 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        count = run()
        best = min(best, time.perf_counter() - start)
    return best, count


def run_grep(path: Path) -> int:
    grep = shutil.which("grep")
    if grep is None:
        raise SystemExit("grep not found on PATH")
    done = subprocess.run([grep, "-c", "NVRM: Xid", str(path)], capture_output=True, check=False)
    return int(done.stdout.decode().strip() or 0)


def run_scan_lines(path: Path, catalogue: XidCatalogue) -> int:
    """The parser alone: text stream, scan_lines, classify (the CLI also reads who wrote each
    Xid line, see run_cli_document)."""
    count = 0
    with path.open(encoding="utf-8", errors="replace") as stream:
        for event in scan_lines(stream):
            catalogue.classify(event)
            count += 1
    return count


def run_cli_document(path: Path, catalogue: XidCatalogue) -> int:
    """`daemon.cli.rig.xid.scan_document` itself (the CLI's JSON rows), when importable."""
    from daemon.cli.rig.xid import scan_document

    with path.open(encoding="utf-8", errors="replace") as stream:
        return len(scan_document(stream, catalogue))


def run_fleetctl_scan(path: Path, out: Path, json_output: bool) -> tuple[float, float, float, int]:
    """`fleetctl xid scan` as a child: (wall s, CPU s, peak RSS in MB, exit status)."""
    argv = [sys.executable, "-m", "daemon.fleetctl", "xid", "scan", str(path)]
    argv += ["--json"] if json_output else []
    with out.open("wb") as sink:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    cpu_s = usage.ru_utime + usage.ru_stime
    return wall_s, cpu_s, usage.ru_maxrss / 1024, child.returncode  # ru_maxrss: KiB on Linux


def storm(lines: int) -> None:
    """Every line an Xid: time and peak memory of the real CLI, human and JSON output."""
    with tempfile.TemporaryDirectory(prefix="cmpfleet-storm-") as tmp:
        path = Path(tmp) / "storm.log"
        xids = generate(path, lines, 1.0)
        size_mib = path.stat().st_size / (1 << 20)
        print(f"storm: {xids:,} Xid lines, {size_mib:.1f} MiB")
        for label, as_json in (("human", False), ("--json", True)):
            out = Path(tmp) / f"out-{label}"
            wall_s, cpu_s, peak_mb, code = run_fleetctl_scan(path, out, as_json)
            if as_json:  # the output is the documented list, whole and parseable
                with out.open(encoding="utf-8") as stream:
                    listed = len(json.load(stream))
            else:
                listed = sum(1 for _ in out.open(encoding="utf-8"))
            verdict = "met" if wall_s < STORM_TARGET_S and peak_mb < STORM_TARGET_MB else "NOT met"
            print(
                f"  fleetctl xid scan {label:<7} {wall_s:7.2f} s (CPU {cpu_s:.2f} s)  "
                f"peak RSS {peak_mb:6.1f} MB  "
                f"exit {code}  ({listed:,} {'items' if as_json else 'lines'} out; "
                f"targets < {STORM_TARGET_S:g} s, < {STORM_TARGET_MB:g} MB: {verdict})"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines to generate")
    parser.add_argument("--xid-fraction", type=float, default=0.01, help="share of Xid lines")
    parser.add_argument("--storm-lines", type=int, default=100_000, help="Xid lines (storm)")
    parser.add_argument("--storm-only", action="store_true", help="run only the storm case")
    args = parser.parse_args()
    if args.lines <= 0 or args.storm_lines <= 0 or not 0 <= args.xid_fraction <= 1:
        parser.error("--lines and --storm-lines must be > 0 and --xid-fraction within 0..1")
    if args.storm_only:
        storm(args.storm_lines)
        return 0
    catalogue = XidCatalogue()
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        path = Path(tmp) / "kern.log"
        xids = generate(path, args.lines, args.xid_fraction)
        size_mib = path.stat().st_size / (1 << 20)
        print(f"log: {args.lines:,} lines, {xids:,} Xid lines, {size_mib:.1f} MiB ({path.name})")
        grep_s, grep_n = best_of(lambda: run_grep(path))
        lines_s, lines_n = best_of(lambda: run_scan_lines(path, catalogue))
        try:
            cli_s, cli_n = best_of(lambda: run_cli_document(path, catalogue))
        except ImportError as exc:
            print(f"(daemon.cli.rig.xid.scan_document not importable: {exc})")
            cli_s, cli_n = float("nan"), 0
    print(f"best of {REPEATS} runs each")
    for label, seconds, found in (
        ("grep -c 'NVRM: Xid'", grep_s, grep_n),
        ("scan_lines + classify (parser path)", lines_s, lines_n),
        ("cmd_xid.scan_document (fleetctl rows)", cli_s, cli_n),
    ):
        rate = args.lines / seconds if seconds > 0 else float("inf")
        print(f"  {label:<42} {seconds:8.3f} s  {rate:14,.0f} lines/s  {found:,} found")
    ratio = lines_s / grep_s if grep_s > 0 else float("inf")
    print(
        f"ratio scan_lines/grep: {ratio:.1f}x (target <= {TARGET_RATIO:g}x): "
        f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}"
    )
    print(
        f"scan_lines total: {lines_s:.3f} s (target < {TARGET_TOTAL_S:g} s): "
        f"{'met' if lines_s < TARGET_TOTAL_S else 'NOT met'}"
    )
    if not math.isnan(cli_s):  # the CLI function was importable
        cli_ratio = cli_s / grep_s if grep_s > 0 else float("inf")
        print(f"ratio scan_document/grep: {cli_ratio:.1f}x, total {cli_s:.3f} s")
    if grep_n != lines_n:
        print(f"MISMATCH: grep counted {grep_n}, scan_lines found {lines_n}")
    # In a fresh, small process: a child's peak RSS counts its parent's at fork time, and
    # this one has just held a million-line scan.
    storm_argv = [sys.executable, __file__, "--storm-only", "--storm-lines", str(args.storm_lines)]
    sys.stdout.flush()
    return subprocess.run(storm_argv, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
