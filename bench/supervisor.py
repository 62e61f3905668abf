"""Bench the engine supervisor: reaction time to an engine death, and its idle CPU cost.

    .venv/bin/python bench/supervisor.py [--idle-s 20] [--backoff-base-s 10] [--ready-after-s 1]

1. Starts the simulated engine under a Supervisor (default settings: probes every 5 s,
   backoff base 10 s) whose reports recovery's real controller answers (its ports in
   memory, as the supervisor tests run it), waits for ready, SIGKILLs the engine, and
   prints the time from the kill to the crash event, to recovery's restart decision (the
   backoff), to the new engine's spawn, and to ready.
2. With the new engine ready and probes at the default interval, measures the CPU time of
   the supervisor's own threads (loop, exit watcher, log reader) over ``--idle-s`` seconds.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support below

from recovery.policy import backoff_delay_s
from recovery.settings import RecoverySettings, policy_settings
from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.process_launcher import ProcessLauncher
from serving.runtime.states import ServingChange, ServingEvent, ServingState
from serving.runtime.supervisor import Supervisor
from serving.settings import ServingSettings, SupervisorTuning
from tests.support.recovery_ports import attach, standalone_recovery


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Timeline:
    """Monotonic arrival time of every event (events are emitted on the loop thread)."""

    def __init__(self) -> None:
        self.items: list[tuple[float, ServingEvent]] = []
        self.changed = threading.Condition()

    def __call__(self, event: ServingEvent) -> None:
        with self.changed:
            self.items.append((time.monotonic(), event))
            self.changed.notify_all()

    def wait(
        self, predicate: Callable[[ServingEvent], bool], timeout_s: float
    ) -> tuple[float, ServingEvent]:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                for at, event in self.items:
                    if predicate(event):
                        return at, event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SystemExit("bench: timed out waiting for an event")
                self.changed.wait(remaining)


def thread_cpu_s(native_ids: set[int] | None) -> float:
    """CPU time of some threads of this process (all when None), in seconds.

    Reads /proc/self/task/TID/schedstat (nanoseconds): psutil's per-thread times come in
    10 ms clock ticks, too coarse for a few milliseconds over 20 s.
    """
    total_ns = 0
    for task in Path("/proc/self/task").iterdir():
        if native_ids is not None and int(task.name) not in native_ids:
            continue
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
    return total_ns / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--backoff-base-s", type=float, default=10.0)
    parser.add_argument("--ready-after-s", type=float, default=1.0)
    args = parser.parse_args()

    port = free_port()
    spec = LaunchSpec(
        mode=LaunchMode.PROCESS,
        argv=(
            sys.executable,
            "-m",
            "serving.sim.engine",
            "serve",
            "/models/sim",
            "--port",
            str(port),
            "--served-model-name",
            "sim",
            "--sim-ready-after-s",
            str(args.ready_after_s),
        ),
        env={},
        host="127.0.0.1",
        port=port,
        served_model_name="sim",
    )
    serving = ServingSettings()
    recovery = RecoverySettings(
        backoff_base_s=args.backoff_base_s, backoff_max_s=max(300.0, args.backoff_base_s)
    )
    tuning = SupervisorTuning()
    timeline = Timeline()
    controller, reports = standalone_recovery(recovery)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        supervisor = Supervisor(
            lambda: spec,
            ProcessLauncher(state),
            state,
            serving=serving,
            tuning=tuning,
            preflight=list,
            on_event=timeline,
            reports=reports,
        )
        attach(controller, supervisor)
        supervisor.open()
        try:
            first = supervisor.start().pid
            assert first is not None
            timeline.wait(
                lambda e: e.kind is ServingChange.STATE and e.state is ServingState.READY, 60
            )

            killed_at = time.monotonic()
            os.kill(first, signal.SIGKILL)
            crashed_at, crash = timeline.wait(lambda e: e.kind is ServingChange.CRASH, 60)
            decided_at, _ = timeline.wait(
                lambda e: e.kind is ServingChange.STATE and e.state is ServingState.BACKOFF, 60
            )
            launched_at, _ = timeline.wait(
                lambda e: (
                    e.kind is ServingChange.LAUNCH
                    and e.launch is not None
                    and e.launch.pid != first
                    and e.launch.ready_at is None
                ),
                600,
            )
            ready_at, _ = timeline.wait(
                lambda e: (
                    e.kind is ServingChange.LAUNCH
                    and e.launch is not None
                    and e.launch.pid != first
                    and e.launch.ready_at is not None
                ),
                600,
            )
            print(
                "== restart after an outside SIGKILL (probe interval "
                f"{serving.probe_interval_s:g} s, backoff base {recovery.backoff_base_s:g} s)"
            )
            print(f"crash class                       : {crash.crash_class}")
            print(f"kill -> crash event               : {(crashed_at - killed_at) * 1000:8.1f} ms")
            print(f"kill -> restart decision (backoff): {(decided_at - killed_at) * 1000:8.1f} ms")
            print(
                f"kill -> new engine spawned        : {(launched_at - killed_at) * 1000:8.1f} ms"
                f"  (backoff {backoff_delay_s(policy_settings(recovery), 1):g} s included)"
            )
            print(
                f"  spawn after the backoff ended   : "
                f"{(launched_at - decided_at - backoff_delay_s(policy_settings(recovery), 1)) * 1000:8.1f} ms"
            )
            print(f"kill -> new engine ready          : {(ready_at - killed_at) * 1000:8.1f} ms")

            names = ("serving-supervisor", "engine-watch:", "logcapture:")
            threads = {
                t.native_id: t.name
                for t in threading.enumerate()
                if t.native_id is not None and t.name.startswith(names)
            }
            before = {tid: thread_cpu_s({tid}) for tid in threads}
            before_process = thread_cpu_s(None)
            started = time.monotonic()
            threading.Event().wait(args.idle_s)
            elapsed = time.monotonic() - started
            used = {tid: thread_cpu_s({tid}) - before[tid] for tid in threads}
            used_process = thread_cpu_s(None) - before_process
            print(
                f"== idle cost while ready ({elapsed:.1f} s, probe every "
                f"{serving.probe_interval_s:g} s, metrics every {serving.metrics_interval_s:g} s,"
                f" log poll every {tuning.log_poll_interval_s:g} s)"
            )
            alive = {t.native_id for t in threading.enumerate()}
            for tid, name in sorted(threads.items(), key=lambda item: item[1]):
                if tid not in alive:
                    print(f"  {name:<32}: ended during the measurement (not counted)")
                    used[tid] = 0.0
                    continue
                print(
                    f"  {name:<32}: {used[tid] * 1000:8.2f} ms "
                    f"= {used[tid] / elapsed * 100:.3f} % of one core"
                )
            total = sum(used.values())
            print(
                f"supervisor threads CPU            : {total * 1000:8.2f} ms "
                f"= {total / elapsed * 100:.3f} % of one core"
            )
            print(
                f"whole bench process (all threads) : {used_process * 1000:8.2f} ms "
                f"= {used_process / elapsed * 100:.3f} % of one core"
            )
        finally:
            supervisor.close(stop_engine=True)
            controller.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
