"""Read-only NVML probe: print one snapshot of this machine's GPUs as JSON, then exit.

Run on a machine with a real GPU (``python bench/nvml_probe.py``) to check NvmlBackend
against a real driver. It never sets anything. Each card's snapshot carries the host-truth
readings (``bar1_total_mib``, ``sm_clock_max_mhz``, ``memory_clock_max_mhz``,
``pcie_replay_count``: null where the card says "not supported"), and ``p2p`` lists
NVML's P2P read status of every pair of cards. Exit status: 0 with JSON on stdout, 2 with
one line on stderr when NVML cannot be used.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hwcheck.backend import BackendError
from hwcheck.nvml.backend import NvmlBackend


def _probe(call_timeout_s: float) -> dict[str, Any]:
    backend = NvmlBackend(call_timeout_s=call_timeout_s)
    try:
        started_s = time.monotonic()
        first = backend.snapshot()
        first_s = time.monotonic() - started_s
        started_s = time.monotonic()
        backend.snapshot()
        second_s = time.monotonic() - started_s
        pairs = backend.p2p_status(first)
        return {
            "backend": backend.name,
            "device_count": backend.device_count(),
            "first_snapshot_s": round(first_s, 4),
            "second_snapshot_s": round(second_s, 4),
            "snapshot": dataclasses.asdict(first),
            "p2p": [{"a": p.a, "b": p.b, "status": p.status.value} for p in pairs],
        }
    finally:
        backend.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--call-timeout-s", type=float, default=10.0, help="per NVML call")
    args = parser.parse_args(argv)
    if not args.call_timeout_s > 0:
        parser.error("--call-timeout-s must be positive")
    try:
        report = _probe(args.call_timeout_s)
    except BackendError as exc:
        print(f"nvml_probe: {exc}", file=sys.stderr)
        return 2
    json.dump(report, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
