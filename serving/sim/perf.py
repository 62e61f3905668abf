"""How fast the simulated engine is: curves worth benchmarking, in a real rig's units.

The figures are a 4-card PP4 DSpark rig's (the recipe's reference: 98.1 tok/s single
stream, 712.8 tok/s at 64 streams, 35.6 tok/s at 1M tokens, 50.8 tok/s without DSpark,
3.03 of 6 drafts accepted), as shapes around the engine's own single-stream pace:

- total decode rises with concurrency and bends to a knee: n streams give
  ``n / (1 + 0.124 (n - 1))`` times one stream's rate (7.3x at 64, the reference's ratio);
  beyond ``--max-num-seqs`` requests wait for a slot, so the total stays flat there;
- decode slows with depth: ``1 / (1 + depth / 570k)`` (0.36 at 1M tokens);
- prefill has its own rate, one prompt at a time (chunked prefill shares the batch), so
  time to first token grows with the queue;
- speculative acceptance falls with depth and temperature (greedy sampling accepts about
  30% more drafts than temperature 1, the build's rate: temperature 0 flatters DSpark),
  and the decode rate follows it:
  ``(1 + a k) / (1 + 0.181 k)`` times the rate without drafts;
- the power cap's factors (``hwcheck.sim.power_model``, through ``--sim-power-file``).

``--sim-time-scale S``: wall seconds per rig second (default 1). Every wait is the rig's
time times S; the engine says S in the ``x-cmpfleet-sim-time-scale`` response header (and
the prefill's own scale and wall time in ``x-cmpfleet-sim-prefill-time-scale`` and
``x-cmpfleet-sim-prefill-wall-s``: prompts past ``--sim-prefill-pace-max-tokens`` are read
300 times faster still, to keep deep canaries cheap), so a benchmark turns what it measured back into a real rig's units. A real vLLM
sends no such header: scale 1.

``--sim-load-file``: the engine writes how many requests run (and its slot count) there,
so the simulated cards' draw follows the load (``hwcheck.sim.workload``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

BATCH_KNEE = 0.124  # 64 / (1 + 63 k) = 712.8 / 98.1
DEPTH_HALF_TOKENS = 570_000.0  # 98.1 -> 35.6 tok/s at 1M tokens
ACCEPTANCE_DEPTH_TOKENS = 300_000.0  # past the knee, acceptance halves over 300k tokens
ACCEPTANCE_KNEE_TOKENS = 4_096  # short prompts accept at the build's rate
TEMPERATURE_ACCEPTANCE_RISE = 0.3  # greedy sampling (temperature 0) accepts 30% more drafts
DRAFT_COST = 0.181  # one draft token's cost against a decode step: 98.1 / 50.8 at 3.03 of 6
UNPACED_COMPRESSION = 0.003  # a prompt past the pacing limit: its rig time x S x this
LOAD_FILE = "sim-engine-load.json"  # in the state dir, under fleetd --simulate
TIME_SCALE_HEADER = "x-cmpfleet-sim-time-scale"
PREFILL_SCALE_HEADER = "x-cmpfleet-sim-prefill-time-scale"
PREFILL_WALL_HEADER = "x-cmpfleet-sim-prefill-wall-s"


def batch_total_factor(streams: int) -> float:
    """Total decode with ``streams`` running, against one stream alone."""
    n = max(streams, 1)
    return n / (1.0 + BATCH_KNEE * (n - 1))


def depth_factor(depth_tokens: int) -> float:
    """Decode speed at ``depth_tokens`` of context against a short prompt."""
    return 1.0 / (1.0 + max(depth_tokens, 0) / DEPTH_HALF_TOKENS)


def acceptance(base: float, depth_tokens: int, temperature: float) -> float:
    """Draft tokens accepted, as a share, at this depth and temperature.

    ``base`` is the build's rate at vLLM's default sampling (temperature 1) on a short
    prompt; greedy sampling flatters it, depth past the knee lowers it.
    """
    cool = 1.0 + TEMPERATURE_ACCEPTANCE_RISE * (1.0 - min(max(temperature, 0.0), 1.0))
    deep = max(depth_tokens - ACCEPTANCE_KNEE_TOKENS, 0) / ACCEPTANCE_DEPTH_TOKENS
    return min(base * cool / (1.0 + deep), 1.0)


def spec_gain(accepted: float, draft_tokens: int) -> float:
    """Decode speed with ``draft_tokens`` drafted per step against none."""
    return (1.0 + accepted * draft_tokens) / (1.0 + DRAFT_COST * draft_tokens)


@dataclass(frozen=True, slots=True)
class PerfSettings:
    """The ``--sim-*`` flags of the performance model."""

    time_scale: float = 1.0
    power_file: str | None = None
    load_file: str | None = None


def _scale(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 1000, got {text}")
    return value


def add_perf_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sim-time-scale``, ``--sim-power-file``, ``--sim-load-file``."""
    parser.add_argument("--sim-time-scale", type=_scale, default=1.0)
    parser.add_argument("--sim-power-file", default=None)
    parser.add_argument("--sim-load-file", default=None)


def perf_from_args(args: argparse.Namespace) -> PerfSettings:
    """The performance settings the parsed flags describe."""
    return PerfSettings(args.sim_time_scale, args.sim_power_file, args.sim_load_file)


class PowerFactors:
    """The cap's factors from the power file, re-read when it changes (thread-safe)."""

    def __init__(self, path: str | None) -> None:
        self._path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._factors = (1.0, 1.0)

    def now(self) -> tuple[float, float]:
        """(decode, prefill) factors; 1.0 each without a file."""
        if self._path is None:
            return (1.0, 1.0)
        try:
            info = self._path.stat()
        except OSError:
            return self._factors
        stamp = (info.st_mtime_ns, info.st_ino)
        with self._lock:
            if stamp != self._stamp:
                try:
                    data = json.loads(self._path.read_text())
                    self._factors = (float(data["decode"]), float(data["prefill"]))
                except (OSError, ValueError, KeyError, TypeError):
                    return self._factors
                self._stamp = stamp
            return self._factors


class PerfModel:
    """The engine's speed now: rig-unit rates and the wall waits they take (thread-safe)."""

    def __init__(
        self,
        settings: PerfSettings,
        single_stream_tok_s: float,
        prefill_tok_s: float,
        max_num_seqs: int,
        draft_tokens: int | None,
        base_acceptance: float,
    ) -> None:
        self.settings = settings
        # The pace flags are wall rates (what canaries measure): the rig's are S times that.
        self.single_stream_tok_s = single_stream_tok_s * settings.time_scale
        self.prefill_tok_s = prefill_tok_s * settings.time_scale
        self.max_num_seqs = max_num_seqs
        self.draft_tokens = draft_tokens
        self.base_acceptance = base_acceptance
        self._power = PowerFactors(settings.power_file)
        self._lock = threading.Lock()
        self._running = 0
        self.prefill_lock = threading.Lock()  # one prompt at a time

    @property
    def time_scale(self) -> float:
        """Wall seconds per rig second."""
        return self.settings.time_scale

    def acceptance(self, depth_tokens: int, temperature: float, base: float | None = None) -> float:
        """Accepted share of drafts for one request."""
        return acceptance(self.base_acceptance if base is None else base, depth_tokens, temperature)

    def stream_tok_s(
        self, depth_tokens: int, temperature: float, base: float | None = None
    ) -> float:
        """One stream's decode rate now, in rig tokens per second."""
        with self._lock:
            running = self._running
        rate = self.single_stream_tok_s * batch_total_factor(running) / max(running, 1)
        rate *= depth_factor(depth_tokens) * self._power.now()[0]
        k = self.draft_tokens
        if k:
            # The pace flag is the rate of a greedy, short request (what the throughput
            # canary and the recipes' figures measure): other sampling and depths relative.
            accepted = self.acceptance(depth_tokens, temperature, base)
            greedy = self.acceptance(0, 0.0, self.base_acceptance)
            rate *= spec_gain(accepted, k) / spec_gain(greedy, k)
        return rate

    def token_wait_s(
        self, depth_tokens: int, temperature: float, base: float | None = None
    ) -> float:
        """Wall seconds one decoded token takes now."""
        return self.time_scale / self.stream_tok_s(depth_tokens, temperature, base)

    def prefill_wait_s(self, prompt_tokens: int, paced_tokens: int) -> float:
        """Wall seconds reading a prompt takes (compressed past the pacing limit)."""
        rig_s = max(prompt_tokens, 0) / (self.prefill_tok_s * self._power.now()[1])
        if paced_tokens >= prompt_tokens:
            return rig_s * self.time_scale
        return rig_s * self.time_scale * UNPACED_COMPRESSION

    def prefill_scale(self, prompt_tokens: int, paced_tokens: int) -> float:
        """Wall seconds per rig second of this prompt's prefill (for the response header)."""
        if paced_tokens >= prompt_tokens:
            return self.time_scale
        return self.time_scale * UNPACED_COMPRESSION

    def started(self) -> None:
        """A request took a slot."""
        with self._lock:
            self._running += 1
            running = self._running
        self.publish(running)

    def finished(self) -> None:
        """A request gave its slot back."""
        with self._lock:
            self._running = max(self._running - 1, 0)
            running = self._running
        self.publish(running)

    def publish(self, running: int | None = None) -> None:
        """Write the load file, 0600 (best effort: a lost write only delays the cards' draw)."""
        path = self.settings.load_file
        if path is None:
            return
        if running is None:
            with self._lock:
                running = self._running
        target = Path(path)
        temporary = target.with_name(f".{target.name}.{threading.get_ident()}.tmp")
        data = json.dumps({"running": running, "max_num_seqs": self.max_num_seqs}).encode()
        with contextlib.suppress(OSError):
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, target)
