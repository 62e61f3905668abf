"""The simulated engine's vLLM-named metrics beyond the load gauges, and its ``/version``.

What fleetd reads of a real engine's ``/metrics`` (``serving.runtime.engine_metrics``),
with vLLM v1's names: speculative decoding's counters (``vllm:spec_decode_num_drafts``,
``..._num_draft_tokens``, ``..._num_accepted_tokens``), the
prefix cache's (``vllm:prefix_cache_queries``/``_hits``, in tokens), inter-token latency
(``vllm:inter_token_latency_seconds``) and ``vllm:num_preemptions``.

Speculative decoding is on when the engine is given ``--speculative-config`` (as the
DSpark recipes are), with ``--sim-spec-acceptance`` of draft tokens accepted (0.6 by
default: a mean accepted length of 4 with 5 draft tokens). ``--sim-spec-collapse-after-s``
drops it to ``--sim-spec-collapsed-acceptance`` that long after ready: a DSpark build gone
bad mid-run. The prefix cache hashes each prompt in 1,024-character blocks, the way vLLM
hashes its KV blocks, so a prompt that repeats an earlier one's beginning hits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from serving.sim.defects import CHARS_PER_TOKEN

ITL_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
BLOCK_CHARS = 1024
MAX_CACHED_BLOCKS = 100_000


@dataclass(frozen=True, slots=True)
class SpecDecodeSim:
    """Speculative decoding as simulated (``num_speculative_tokens`` None: off)."""

    num_speculative_tokens: int | None = None
    acceptance: float = 0.6
    collapse_after_s: float | None = None
    collapsed_acceptance: float = 0.15

    def acceptance_at(self, since_ready_s: float) -> float:
        """Draft tokens accepted, as a share, this long after ready."""
        if self.collapse_after_s is not None and since_ready_s >= self.collapse_after_s:
            return self.collapsed_acceptance
        return self.acceptance


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_metric_arguments(parser: argparse.ArgumentParser) -> None:
    """vLLM's ``--speculative-config`` and the simulation's spec-decode and build flags."""
    parser.add_argument("--speculative-config", default=None)
    parser.add_argument("--sim-spec-acceptance", type=_share, default=0.6)
    parser.add_argument("--sim-spec-collapse-after-s", type=_seconds, default=None)
    parser.add_argument("--sim-spec-collapsed-acceptance", type=_share, default=0.15)
    parser.add_argument("--sim-build-file", default=None)
    # The image (tag or digest reference) whose build it runs: a container's, under --simulate.
    parser.add_argument("--sim-image", default=None)


def speculative_tokens(config: str | None) -> int | None:
    """``num_speculative_tokens`` of vLLM's ``--speculative-config`` JSON (None: off)."""
    if not config:
        return None
    try:
        value = json.loads(config).get("num_speculative_tokens")
    except (ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def spec_from_args(args: argparse.Namespace) -> SpecDecodeSim:
    """The speculative decoding the parsed flags describe."""
    return SpecDecodeSim(
        num_speculative_tokens=speculative_tokens(args.speculative_config),
        acceptance=args.sim_spec_acceptance,
        collapse_after_s=args.sim_spec_collapse_after_s,
        collapsed_acceptance=args.sim_spec_collapsed_acceptance,
    )


class VllmExtras:
    """The extra metric families, registered on the engine's registry (thread-safe)."""

    def __init__(self, registry: CollectorRegistry, model_name: str, spec: SpecDecodeSim) -> None:
        self.spec = spec
        label = {"model_name": model_name}
        self._lock = threading.Lock()
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

        def counter(name: str, documentation: str) -> Counter:
            return Counter(name, documentation, ["model_name"], registry=registry).labels(**label)

        self.prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self.prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ["model_name"],
            buckets=ITL_BUCKETS_S,
            registry=registry,
        ).labels(**label)
        if spec.num_speculative_tokens is not None:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.draft_tokens = counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."
            )
            self.accepted_tokens = counter(
                "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."
            )

    def _cached_tokens(self, prompt: str) -> int:
        """Tokens of ``prompt``'s leading blocks seen before; the blocks are remembered."""
        hits = 0
        chain = b""
        contiguous = True
        with self._lock:
            for start in range(0, len(prompt) - BLOCK_CHARS + 1, BLOCK_CHARS):
                block = prompt[start : start + BLOCK_CHARS].encode()
                chain = hashlib.blake2b(chain + block, digest_size=16).digest()
                if contiguous and chain in self._blocks:
                    self._blocks.move_to_end(chain)
                    hits += 1
                    continue
                contiguous = False
                self._blocks[chain] = None
            while len(self._blocks) > MAX_CACHED_BLOCKS:
                self._blocks.popitem(last=False)
        return hits * BLOCK_CHARS // CHARS_PER_TOKEN

    def observe(
        self,
        prompt: str,
        prompt_tokens: int,
        generated: int,
        itl_s: float,
        since_ready_s: float,
        accepted: float | None = None,
    ) -> None:
        """Count one finished request: cache lookups, decode steps, draft acceptance.

        ``accepted``: this request's share of drafts accepted (``serving.sim.perf``: it
        falls with depth and temperature); None: the build's rate now.
        """
        self.prefix_queries.inc(prompt_tokens)
        self.prefix_hits.inc(min(self._cached_tokens(prompt), prompt_tokens))
        for _ in range(max(generated - 1, 0)):
            self.itl.observe(itl_s)
        k = self.spec.num_speculative_tokens
        if k is None or generated < 1:
            return
        rate = self.spec.acceptance_at(since_ready_s) if accepted is None else accepted
        drafts = math.ceil(generated / (1.0 + rate * k))
        accepted = min(round(drafts * k * rate), drafts * k)
        self.drafts.inc(drafts)
        self.draft_tokens.inc(drafts * k)
        self.accepted_tokens.inc(accepted)
