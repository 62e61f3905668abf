"""A stand-in for ``vllm serve``: the same HTTP surface, log lines and failure modes.

Run as ``python -m serving.sim.engine serve MODEL [vllm flags...] --port N --host H
--served-model-name NAME [--sim-... flags]``. It accepts (and ignores) every vLLM flag, so a
real preset's argv runs unchanged with the program swapped. It exists so that the
supervisor, the daemon, the dashboard and the canaries can be exercised for real (real
processes, real HTTP, real signals) on a machine with no GPU.

What it imitates: ``/health`` answers 503 while "loading" and 200 once ready;
``/v1/models`` lists the served name once ready; ``/v1/chat/completions`` answers in the
OpenAI shape, streamed (SSE) or not, at ``--sim-tokens-per-s``; ``/metrics`` exports vLLM's
metric names. SIGINT (vLLM's stop signal) and SIGTERM shut it down with exit 0. SIGUSR1
crashes it at once with the ``--sim-crash-kind`` trace and exit 1, so a test can crash a
ready engine at the moment it chooses instead of racing a timer. Like vLLM, a crashed
engine answers ``/health`` 503 (``EngineDeadError``) and closes its API server before its
process exits; ``--sim-crash-linger-s`` keeps the process that long after (its workers'
teardown), so health probes fail before the exit is seen.

Failure modes, each a flag: a CUDA crash with vLLM's trace after ready
(``--sim-crash-after-s``), a failure while loading (``--sim-fail-start-after-s``), a hang
(``--sim-hang-after-s``: connections are accepted but never answered), ignoring stop
signals, mangling copied identifiers, leaking tool calls as raw DSML markup, putting
reasoning in ``reasoning`` only or in ``content``, and printing given log lines after ready
(non-fatal signatures the canaries count). Prefill (``--sim-prefill-tokens-per-s``) and
decode are paced, and ``ignore_eos`` generates to ``max_tokens``, so the throughput
canary measures what the scenario sets (the power-brake scenario runs at a quarter rate).
Like vLLM it echoes its flags at start (those it does not use, ``--api-key`` included), and
its whole environment.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from serving.sim.checkpoint import SHARDS, ShardLoader, load_failure_lines
from serving.sim.core import EngineLog, SimEngine, crash_trace
from serving.sim.crash_depth import crash_lines, kv_pool_lines, pp_size_of
from serving.sim.handler import EngineServer
from serving.sim.images import build_flag, build_of
from serving.sim.lifetime import end_with_watched_process
from serving.sim.options import SimOptions, parse_options


def _install_signals(
    options: SimOptions, stopping: threading.Event, crashing: threading.Event
) -> None:
    def on_stop(signum: int, frame: object) -> None:
        stopping.set()

    def on_crash(signum: int, frame: object) -> None:
        crashing.set()
        stopping.set()

    signal.signal(signal.SIGUSR1, on_crash)

    for signum in (signal.SIGINT, signal.SIGTERM):
        ignored = options.ignore_signals or (signum == signal.SIGINT and options.ignore_sigint)
        signal.signal(signum, signal.SIG_IGN if ignored else on_stop)


def _loading(engine: SimEngine, started: float) -> bool:
    """Print checkpoint-loading progress until ready; False when it must stop or fail.

    A model that is a checkpoint directory (``serving.sim.checkpoint``) is loaded shard by
    shard as the progress passes them: a short shard ends the start with vLLM's lines.
    """
    options = engine.options
    step_s = max(0.2, min(2.0, options.ready_after_s / 10))
    fail_at = options.fail_start_after_s
    loader = ShardLoader.of(options.model)
    shards = len(loader.names) if loader is not None else SHARDS
    while True:
        elapsed = time.monotonic() - started
        if fail_at is not None and elapsed >= fail_at:
            for line in crash_trace(options.crash_kind):
                engine.log.line(line)
            return False
        pct = int(100 * elapsed / options.ready_after_s) if options.ready_after_s else 100
        pct = min(pct, 100)
        problem = None if loader is None else loader.load_until(shards * pct // 100)
        if problem is not None:
            pp_size = pp_size_of(options.ignored)
            for line in load_failure_lines(problem, pp_size, os.getpid()):
                engine.log.line(line)
            return False
        if elapsed >= options.ready_after_s:
            return True
        engine.log.line(
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | "
            f"{shards * pct // 100}/{shards} [{elapsed:05.1f}s]"
        )
        wait_s = min(step_s, options.ready_after_s - elapsed)
        if fail_at is not None:
            wait_s = min(wait_s, max(fail_at - elapsed, 0.0))
        if engine.stopping.wait(max(wait_s, 0.0)):
            return False


def _emit_log_lines(engine: SimEngine) -> None:
    """Print the ``--sim-log-line`` lines at their times after ready (signature tests)."""
    ready_at = time.monotonic()
    for timed in sorted(engine.options.log_lines, key=lambda line: line.after_s):
        if engine.stopping.wait(max(ready_at + timed.after_s - time.monotonic(), 0.0)):
            return
        engine.log.line(timed.text)


def _crash(engine: SimEngine) -> int:
    """Print the crash's trace; the exit status of a crashed engine.

    With ``--sim-crash-rank`` the named rank's worker faults first (its Xid mark too).
    """
    engine.dead.set()
    options = engine.options
    rank = options.depth_crash.rank
    if rank is not None and engine.deep_crash is None:
        pp_size = pp_size_of(options.ignored)
        for line in crash_lines(options.crash_kind, rank, pp_size, None, "", os.getpid()):
            engine.log.line(line)
        time.sleep(0.3)
    for line in crash_trace(engine.options.crash_kind):
        engine.log.line(line)
    return 1


def _depth_crash(engine: SimEngine) -> int:
    """The deep request's crash: vLLM's dump and worker lines, the Xid mark, then the trace."""
    engine.dead.set()
    options = engine.options
    tokens, request_id = engine.deep_crash or (0, "")
    pp_size = pp_size_of(options.ignored)
    rank = options.depth_crash.rank
    rank = pp_size - 1 if rank is None else rank
    for line in crash_lines(options.crash_kind, rank, pp_size, tokens, request_id, os.getpid()):
        engine.log.line(line)
    # A real worker dies a moment after its card's Xid: the kernel line comes first.
    time.sleep(0.3)
    for line in crash_trace(options.crash_kind):
        engine.log.line(line)
    return 1


def _serve(engine: SimEngine, crashing: threading.Event, started: float) -> int:
    """Load, then serve until stopped (0) or crashed (1)."""
    options = engine.options
    log = engine.log
    if not _loading(engine, started):
        if crashing.is_set():
            return _crash(engine)
        if engine.stopping.is_set():
            log.line("INFO:     Shutting down")
            return 0
        return 1
    log.line(f"INFO:     Started server process [{os.getpid()}]")
    log.line("INFO:     Waiting for application startup.")
    for line in kv_pool_lines(options.ignored, options.max_model_len, options.cards_file):
        log.vllm("INFO", "kv_cache_utils.py:1087", line)
    engine.became_ready()
    log.line("INFO:     Application startup complete.")
    if options.log_lines:
        threading.Thread(target=_emit_log_lines, args=(engine,), daemon=True).start()
    ready_at = time.monotonic()
    crash_at = None if options.crash_after_s is None else ready_at + options.crash_after_s
    hang_at = None if options.hang_after_s is None else ready_at + options.hang_after_s
    while True:
        deadlines = [t for t in (crash_at, hang_at) if t is not None]
        timeout = max(min(deadlines) - time.monotonic(), 0.0) if deadlines else None
        if engine.stopping.wait(timeout):
            if crashing.is_set():
                return _crash(engine)
            if engine.deep_crash is not None:
                return _depth_crash(engine)
            log.line("INFO:     Shutting down")
            return 0
        now = time.monotonic()
        if crash_at is not None and now >= crash_at:
            return _crash(engine)
        if hang_at is not None and now >= hang_at:
            engine.hung.set()
            hang_at = None
            log.vllm(
                "WARNING",
                "shm_broadcast.py:466",
                "No available shared memory broadcast block found in 60 seconds. "
                "This typically happens when some processes are hanging or doing some "
                "time-consuming work (e.g. compilation, weight/kv cache quantization).",
            )


def run(options: SimOptions) -> int:
    """Serve until stopped (exit 0), crashed (exit 1) or unable to bind (exit 1)."""
    log = EngineLog()
    engine = SimEngine(options, log)
    crashing = threading.Event()
    _install_signals(options, engine.stopping, crashing)
    started = time.monotonic()
    log.vllm("INFO", "api_server.py:1880", "vLLM API server version 0.11.0 (cmpfleet simulated)")
    log.vllm("INFO", "utils.py:326", f"non-default args: {{'model': '{options.model}'}}")
    if options.ignored:
        log.vllm("INFO", "arg_utils.py:1320", f"accepted flags: {' '.join(options.ignored)}")
    # Like a fork's debug line (and a model's remote code printing os.environ): the whole
    # environment, secrets included, so fleetd's masking of engine output is tested.
    environment = " ".join(f"{name}={value}" for name, value in sorted(os.environ.items()))
    log.vllm("DEBUG", "envs.py:1005", f"environment: {environment}")
    log.vllm(
        "WARNING",
        "_custom_ops.py:20",
        "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")",
    )
    try:
        server = EngineServer((options.host, options.port), engine)
    except OSError as exc:
        log.vllm("ERROR", "api_server.py:1895", f"cannot bind {options.host}:{options.port}: {exc}")
        return 1
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    log.vllm(
        "INFO",
        "api_server.py:1912",
        f"Starting vLLM API server 0 on http://{options.host}:{options.port}",
    )
    code = 1
    try:
        code = _serve(engine, crashing, started)
    finally:
        engine.stopping.set()
        server.shutdown()
        server.server_close()
    if engine.dead.is_set() and options.crash_linger_s:
        # A crash only (not a failed bind or load): vLLM's API server goes first, its
        # workers' teardown keeps the process a while.
        time.sleep(options.crash_linger_s)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m serving.sim.engine``.

    A ``--sim-build-file`` build's flags (a simulated image rebuild) follow the command
    line's, so they win.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    build = build_of(build_flag(args), build_flag(args, "--sim-image"))
    if build is not None:
        args += [str(arg) for arg in build.get("args") or []]
    options = parse_options(args)
    end_with_watched_process()  # under a test session: end with it (serving.sim.lifetime)
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
