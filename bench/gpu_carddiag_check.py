"""The card diagnostics' kernels and link test on a real GPU, in one short prepared run.

Run from the repository root with the system Python (no packages, no CUDA toolkit: the
standard library and the driver's libcuda.so.1, exactly what a rig has):

    python3 bench/gpu_carddiag_check.py [--card 0] [--seconds 10] [--transfer-mib 256]

Steps (a failing step prints its error and the run goes on to the next):
 1. the driver: CUDA's view of the card, the SM count; ``compute.ptx`` loaded by the driver;
 2. every kernel once: every word bit-exact against the Python twin
    (``hwcheck.carddiag.compute.expected_words``), every SM seen (``%smid``), ms per launch;
 3. the judge's self-test: one word flipped in a real launch's read-back must be found on
    the SM that wrote it (the kernels cannot be made wrong on a healthy card);
 4. ``--seconds`` of the compute procedure as the child runs it (rounds, results checked);
 5. the link: pinned copies both ways (median of 5 at ``--transfer-mib``), a compared round
    trip, judged against the link NVML would report (read here from sysfs when present);
 6. the real child process (``python3 -m hwcheck.carddiag.child``) for both kinds.
Everything is printed; with $OUT set, a JSON summary goes to $OUT/carddiag_gpu.json. Exit 0
when every step passed (or when there is no GPU: it says so), 1 otherwise. A watchdog
ends the run after --limit-s seconds (default 200), writing what it has.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_run import GpuRun  # noqa: E402

from hwcheck.carddiag.compute import (  # noqa: E402
    KERNELS,
    KernelTally,
    Launch,
    judge_launch,
    run_compute,
)
from hwcheck.carddiag.cuda import CardDevice, add_signatures  # noqa: E402
from hwcheck.carddiag.model import DiagKind, DiagPlan  # noqa: E402
from hwcheck.carddiag.pcie import Link, expected_gb_per_s, judge, measure  # noqa: E402
from hwcheck.memtest.cuda import CudaFailed, device_count, load_driver  # noqa: E402

RUN = GpuRun("carddiag_gpu.json")
SUMMARY = RUN.summary
say = RUN.say
step = RUN.step
write_summary = RUN.write_summary


def sysfs_link(card_bus_hint: str | None) -> tuple[int | None, int | None]:
    """The first NVIDIA device's current link from sysfs (gen from GT/s), when readable."""
    speeds = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}
    for device in sorted(Path("/sys/bus/pci/devices").glob("*")):
        try:
            if (device / "vendor").read_text().strip() != "0x10de":
                continue
            if not (device / "class").read_text().startswith("0x03"):
                continue
            speed = (device / "current_link_speed").read_text().split()[0]
            width = int((device / "current_link_width").read_text())
            return speeds.get(speed), width
        except (OSError, ValueError):
            continue
    return None, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--transfer-mib", type=int, default=256)
    parser.add_argument("--limit-s", type=int, default=200)
    args = parser.parse_args()
    SUMMARY.update(card=args.card)

    RUN.arm_watchdog(args.limit_s)
    try:
        lib = add_signatures(load_driver())
        count = device_count(lib)
    except (OSError, AttributeError, CudaFailed) as exc:
        return RUN.no_gpu(str(exc))
    if count <= args.card:
        return RUN.no_gpu(f"CUDA sees {count} card(s), card {args.card} asked")
    SUMMARY["gpu"] = True
    holder: dict[str, CardDevice] = {}

    def driver() -> dict[str, Any]:
        started = time.monotonic()
        holder["device"] = CardDevice(lib, args.card)
        device = holder["device"]
        say(f"{device.sm_count} SMs; module loaded in {time.monotonic() - started:.2f} s")
        return {"sm_count": device.sm_count, "load_s": round(time.monotonic() - started, 3)}

    def every_kernel() -> dict[str, Any]:
        device = holder["device"]
        figures: dict[str, Any] = {}
        ok = True
        for kernel in KERNELS:
            started = time.perf_counter()
            launch = device.launch(kernel, 0x5EED)
            ms = (time.perf_counter() - started) * 1000
            tally = KernelTally()
            judge_launch(kernel, launch, 0x5EED, tally)
            seen = len(set(launch.block_sms))
            say(f"{kernel.name}: {tally.wrong} of {tally.words} wrong, {seen} SMs, {ms:.1f} ms")
            figures[kernel.name] = {
                "wrong": tally.wrong,
                "words": tally.words,
                "sms": seen,
                "ms": round(ms, 2),
            }
            ok = ok and tally.wrong == 0 and seen == device.sm_count
        figures["ok"] = ok
        return figures

    def self_test() -> dict[str, Any]:
        device = holder["device"]
        kernel = KERNELS[1]
        launch = device.launch(kernel, 7)
        words = list(launch.words)
        index = len(words) // 2
        words[index] ^= 0x400
        tally = KernelTally()
        judge_launch(kernel, Launch(launch.block_sms, words, launch.threads_per_block), 7, tally)
        sm = launch.block_sms[index // launch.threads_per_block]
        say(f"planted on SM {sm}: found {tally.wrong} on {tally.per_sm}")
        return {"ok": tally.wrong == 1 and tally.per_sm == {sm: 1}, "sm": sm}

    def procedure() -> dict[str, Any]:
        device = holder["device"]
        result = run_compute(
            device, args.card, DiagPlan(DiagKind.COMPUTE, seconds=args.seconds), lambda: None
        )
        say(result.line())
        return {"ok": result.outcome.value == "passed", **result.figures}

    def link() -> dict[str, Any]:
        device = holder["device"]
        measured = measure(
            device, DiagPlan(DiagKind.PCIE, transfer_mib=args.transfer_mib), lambda: None
        )
        assert not isinstance(measured, str)
        gen, width = sysfs_link(None)
        verdict = judge(args.card, Link(gen, width, gen, width), None, measured)
        say(
            f"h2d {measured.h2d_gb_per_s:.2f} GB/s, d2h {measured.d2h_gb_per_s:.2f} GB/s, "
            f"{measured.mismatched_bytes} bytes changed; Gen{gen} x{width} expects "
            f"{expected_gb_per_s(gen, width)}: {verdict.line()}"
        )
        return {
            "ok": measured.mismatched_bytes == 0,
            "h2d_gb_per_s": round(measured.h2d_gb_per_s, 3),
            "d2h_gb_per_s": round(measured.d2h_gb_per_s, 3),
            "gen": gen,
            "width": width,
            "verdict": verdict.line(),
        }

    def children() -> dict[str, Any]:
        figures: dict[str, Any] = {}
        ok = True
        for kind in ("compute", "pcie"):
            plan = {"kind": kind, "seconds": 0, "transfer_mib": 64, "repeats": 3, "stop_file": None}
            done = subprocess.run(
                [sys.executable, "-m", "hwcheck.carddiag.child", str(args.card), json.dumps(plan)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                cwd=ROOT,
                env={**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
            )
            say(f"{kind}: {done.stdout.strip()[:300]}")
            figures[kind] = done.stdout.strip()[:2000]
            ok = (
                ok
                and done.returncode == 0
                and ("passed" in done.stdout or "measured" in done.stdout)
            )
        figures["ok"] = ok
        return figures

    oks = [
        step("1 driver and PTX load", driver),
        step("2 every kernel bit-exact on every SM", every_kernel),
        step("3 the judge finds a planted wrong word", self_test),
        step("4 the compute procedure", procedure),
        step("5 the link", link),
    ]
    if "device" in holder:
        holder["device"].close()
    oks.append(step("6 the real child processes", children))
    SUMMARY["passed"] = all(oks)
    say(f"\n{'ALL PASSED' if all(oks) else 'SOME FAILED'}")
    write_summary()
    return 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
