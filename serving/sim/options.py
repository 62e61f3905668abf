"""The simulated engine's command line: vLLM's flags accepted, ``--sim-*`` flags read."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from serving.sim import crash_depth
from serving.sim.crash_depth import DepthCrash
from serving.sim.defects import LongContextDefects, add_defect_arguments, defects_from_args
from serving.sim.leaks import LEAK_MODES
from serving.sim.perf import PerfSettings, add_perf_arguments, perf_from_args
from serving.sim.vllm_metrics import SpecDecodeSim, add_metric_arguments, spec_from_args

CRASH_KINDS = ("cuda_fault", "engine_dead", "kv_oom", "driver_poisoned", "rpc_timeout")
# Where the reasoning goes with thinking on: both fields (a patched build), only
# ``reasoning_content``, only ``reasoning`` (the sm_80 forks), or leaked into ``content``.
REASONING_FIELDS = ("both", "reasoning_content", "reasoning", "content")


@dataclass(frozen=True)
class TimedLogLine:
    """A line the engine prints ``after_s`` seconds after it got ready."""

    after_s: float
    text: str


@dataclass(frozen=True)
class SimOptions:
    """The flags the simulated engine understands (everything else is ignored)."""

    model: str
    served_model_name: str
    host: str
    port: int
    max_num_seqs: int
    max_model_len: int
    ready_after_s: float
    crash_after_s: float | None
    crash_linger_s: float
    fail_start_after_s: float | None
    crash_kind: str
    hang_after_s: float | None
    ignore_sigint: bool
    ignore_signals: bool
    tokens_per_s: float
    prefill_tokens_per_s: float
    corrupt_identifiers_pct: float
    leak_dsml: bool
    reasoning_field: str
    log_lines: tuple[TimedLogLine, ...]
    seed: int
    ignored: tuple[str, ...]
    defects: LongContextDefects = field(default_factory=LongContextDefects)
    spec: SpecDecodeSim = field(default_factory=SpecDecodeSim)
    build_file: str | None = None
    image: str | None = None
    leak_mode: str = ""  # ``--sim-leak-mode`` (``serving.sim.leaks``)
    depth_crash: DepthCrash = field(default_factory=DepthCrash)
    cards_file: str | None = None
    perf: PerfSettings = field(default_factory=PerfSettings)


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _percent(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text}")
    return value


def _timed_line(text: str) -> TimedLogLine:
    after, sep, line = text.partition("=")
    try:
        after_s = float(after)
    except ValueError:
        after_s = -1.0
    if not sep or after_s < 0:
        raise argparse.ArgumentTypeError(f"expected AFTER_S=TEXT, got {text!r}")
    return TimedLogLine(after_s, line)


def parse_options(argv: Sequence[str]) -> SimOptions:
    """Parse ``serve MODEL ...``; unknown (vLLM) flags are kept in ``ignored``."""
    parser = argparse.ArgumentParser(
        prog="python -m serving.sim.engine", description=__doc__, allow_abbrev=False
    )
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--max-num-seqs", type=int, default=8)
    parser.add_argument("--max-model-len", type=int, default=131072)
    parser.add_argument("--sim-ready-after-s", type=_non_negative, default=5.0)
    parser.add_argument("--sim-crash-after-s", type=_non_negative, default=None)
    parser.add_argument("--sim-crash-linger-s", type=_non_negative, default=0.0)
    parser.add_argument("--sim-fail-start-after-s", type=_non_negative, default=None)
    parser.add_argument("--sim-crash-kind", choices=CRASH_KINDS, default="cuda_fault")
    parser.add_argument("--sim-hang-after-s", type=_non_negative, default=None)
    parser.add_argument("--sim-ignore-sigint", action="store_true")
    parser.add_argument("--sim-ignore-signals", action="store_true")
    parser.add_argument("--sim-tokens-per-s", type=_positive, default=50.0)
    parser.add_argument("--sim-prefill-tokens-per-s", type=_positive, default=1600.0)
    parser.add_argument("--sim-corrupt-identifiers-pct", type=_percent, default=0.0)
    parser.add_argument("--sim-leak-dsml", action="store_true")
    parser.add_argument(
        "--sim-leak-mode", choices=[mode for mode in LEAK_MODES if mode], default=""
    )
    parser.add_argument("--sim-reasoning-field", choices=REASONING_FIELDS, default="both")
    parser.add_argument("--sim-log-line", type=_timed_line, action="append", default=[])
    parser.add_argument("--sim-seed", type=int, default=0)
    add_defect_arguments(parser)
    crash_depth.add_arguments(parser)
    add_metric_arguments(parser)
    # A rebuild's keys at their "off" value (``serving.sim.scenario.override_args``): back
    # to the default, whatever the scenario's flags said before them.
    parser.add_argument("--sim-unset", action="append", default=[])
    add_perf_arguments(parser)
    args, unknown = parser.parse_known_args(list(argv))
    for dest in args.sim_unset:
        if dest != "sim_unset" and hasattr(args, dest):
            setattr(args, dest, parser.get_default(dest))
    if not 0 < args.port < 65536:
        parser.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.max_num_seqs < 1:
        parser.error(f"--max-num-seqs must be >= 1, got {args.max_num_seqs}")
    served = args.served_model_name[0] if args.served_model_name else args.model
    return SimOptions(
        model=args.model,
        served_model_name=served,
        host=args.host,
        port=args.port,
        max_num_seqs=args.max_num_seqs,
        max_model_len=args.max_model_len,
        ready_after_s=args.sim_ready_after_s,
        crash_after_s=args.sim_crash_after_s,
        crash_linger_s=args.sim_crash_linger_s,
        fail_start_after_s=args.sim_fail_start_after_s,
        crash_kind=args.sim_crash_kind,
        hang_after_s=args.sim_hang_after_s,
        ignore_sigint=args.sim_ignore_sigint,
        ignore_signals=args.sim_ignore_signals,
        tokens_per_s=args.sim_tokens_per_s,
        prefill_tokens_per_s=args.sim_prefill_tokens_per_s,
        corrupt_identifiers_pct=args.sim_corrupt_identifiers_pct,
        leak_dsml=args.sim_leak_dsml,
        reasoning_field=args.sim_reasoning_field,
        log_lines=tuple(args.sim_log_line),
        seed=args.sim_seed,
        ignored=tuple(unknown),
        defects=defects_from_args(args),
        spec=spec_from_args(args),
        build_file=args.sim_build_file,
        image=args.sim_image,
        leak_mode=args.sim_leak_mode,
        depth_crash=crash_depth.from_args(args),
        cards_file=args.sim_cards_file,
        perf=perf_from_args(args),
    )
