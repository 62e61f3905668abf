"""The simulated engine's depth faults and its KV pool line: what the crash black box reads.

Two things a real DeepSeek V4 rig shows that the simulated engine now does too:

- a crash at a prompt depth on one pipeline rank (``--sim-crash-at-depth-tokens``,
  ``--sim-crash-rank``, kind ``--sim-crash-kind``): the first request at least that deep
  kills the engine the way vLLM v1 dies, with the scheduler dump (the request's id and
  ``prompt_token_ids_len``, never its text), the worker's fault line with its rank
  prefix, and a ``[cmpfleet-sim] Xid N on PP rank R`` line that fleetd's simulation turns
  into the matching Xid on that rank's card (``daemon.engine.sim_xids``);
- at ready, vLLM's "GPU KV cache size: N tokens" and "Maximum concurrency" lines, sized
  from the cards' memory (``--sim-cards-file``, written by fleetd's simulated rig: a card
  that reports less memory at a boot gives a smaller pool), ``--gpu-memory-utilization``
  and the layer partition (``VLLM_PP_LAYER_PARTITION``, else vLLM's even split).

The pool model is calibrated on the seeds' figures: four 64 GiB cards at 0.92 give about
798,660 tokens with the even split and about 1,476,563 with ``12,12,12,7`` (the last rank
also carries lm_head and the drafter).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

XID_MARK = re.compile(r"\[cmpfleet-sim\] Xid (\d+) on PP rank (\d+)")
# The crash kinds with a kernel-log Xid on the faulting card (an illegal access: Xid 31).
XID_OF_KIND = {"cuda_fault": 31}
CARDS_FILE = "sim-cards.json"
PARTITION_ENV = "VLLM_PP_LAYER_PARTITION"

# The pool model (MiB; per token and layer for the KV): see the module's docstring.
MODEL_LAYERS = 43
WEIGHTS_PER_LAYER_MIB = 3000.0
LAST_RANK_EXTRA_MIB = 18244.0
ACTIVATIONS_MIB = 2000.0
KV_PER_TOKEN_LAYER_MIB = 22293.0 / (12 * 1_476_563)
DEFAULT_CARD_MIB = 65536


@dataclass(frozen=True, slots=True)
class DepthCrash:
    """Crash at the first request at least ``depth_tokens`` deep, on ``rank`` (None: last)."""

    depth_tokens: int | None = None
    rank: int | None = None


def _depth(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _rank(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The depth crash's and the KV pool's flags."""
    parser.add_argument("--sim-crash-at-depth-tokens", type=_depth, default=None)
    parser.add_argument("--sim-crash-rank", type=_rank, default=None)
    parser.add_argument("--sim-cards-file", default=None)


def from_args(args: argparse.Namespace) -> DepthCrash:
    """The depth crash the flags ask for."""
    return DepthCrash(args.sim_crash_at_depth_tokens, args.sim_crash_rank)


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` among vLLM's flags the simulated engine does not read."""
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def pp_size_of(argv: Sequence[str]) -> int:
    """``--pipeline-parallel-size`` (1 when absent or bad)."""
    raw = flag_value(argv, "--pipeline-parallel-size") or flag_value(argv, "-pp")
    try:
        return max(int(raw or 1), 1)
    except ValueError:
        return 1


def partition(env: Mapping[str, str], pp_size: int) -> list[int]:
    """The layers per rank: ``VLLM_PP_LAYER_PARTITION``, else vLLM's even split.

    vLLM gives each rank ``layers // pp`` and the remainder to the ranks before the last.
    """
    raw = env.get(PARTITION_ENV, "")
    try:
        given = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        given = []
    if len(given) == pp_size and all(layers > 0 for layers in given):
        return given
    layers = [MODEL_LAYERS // pp_size] * pp_size
    for i in range(2, MODEL_LAYERS % pp_size + 2):
        layers[-i] += 1
    return layers


def card_memory_mib(cards_file: str | None, pp_size: int) -> list[int]:
    """Each rank's card memory: the simulated rig's cards, else 64 GiB each."""
    found: list[int] = []
    if cards_file:
        try:
            doc = json.loads(Path(cards_file).read_text())
            found = [int(card["memory_total_mib"]) for card in doc.get("cards", [])]
        except (OSError, ValueError, KeyError, TypeError):
            found = []
    found = found[:pp_size]
    return found + [DEFAULT_CARD_MIB] * (pp_size - len(found))


def kv_pool_tokens(memory_mib: Sequence[int], layers: Sequence[int], utilization: float) -> int:
    """The pool: the rank with the least room for its layers' KV decides (vLLM takes the min)."""
    pools = []
    for rank, (total, count) in enumerate(zip(memory_mib, layers, strict=True)):
        room = total * utilization - ACTIVATIONS_MIB - count * WEIGHTS_PER_LAYER_MIB
        if rank == len(layers) - 1:
            room -= LAST_RANK_EXTRA_MIB
        pools.append(max(room, 0.0) / (count * KV_PER_TOKEN_LAYER_MIB))
    return int(min(pools)) if pools else 0


def kv_pool_lines(
    ignored: Sequence[str],
    max_model_len: int,
    cards_file: str | None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """vLLM's two lines at the end of memory profiling, from the cards and the partition."""
    env = os.environ if env is None else env
    pp_size = pp_size_of(ignored)
    try:
        utilization = float(flag_value(ignored, "--gpu-memory-utilization") or 0.9)
    except ValueError:
        utilization = 0.9
    tokens = kv_pool_tokens(
        card_memory_mib(cards_file, pp_size), partition(env, pp_size), utilization
    )
    concurrency = tokens / max(max_model_len, 1)
    return [
        f"GPU KV cache size: {tokens:,} tokens",
        f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x",
    ]


def crash_lines(
    kind: str,
    rank: int,
    pp_size: int,
    prompt_tokens: int | None,
    request_id: str,
    pid: int,
) -> list[str]:
    """What vLLM prints when a worker dies: the dump, the fault line, the Xid mark.

    With ``prompt_tokens`` (a deep request) the scheduler dump names the request; without
    one (a crash on a timer, ``rank-repeat``) the fault comes during speculative verify.
    """
    lines: list[str] = []
    worker = f"(Worker_PP{rank} pid={pid + 1 + rank})"
    if prompt_tokens is not None:
        lines.append(
            f"(EngineCore_0 pid={pid}) ERROR [dump_input.py:76] Dumping scheduler output for "
            f"model execution: SchedulerOutput(scheduled_new_reqs=[NewRequestData("
            f"req_id={request_id},prompt_token_ids_len={prompt_tokens},mm_features=[],"
            "sampling_params=None,block_ids=([],),num_computed_tokens=0,lora_request=None)],)"
        )
    else:
        lines.append(
            f'{worker} ERROR   File "/vllm/v1/sample/rejection_sampler.py", line 184, in '
            "forward (speculative verify)"
        )
    if kind == "cuda_fault":
        lines.append(
            f"{worker} ERROR [multiproc_executor.py:671] RuntimeError: CUDA error: an illegal "
            "memory access was encountered"
        )
    xid = XID_OF_KIND.get(kind)
    if xid is not None and 0 <= rank < max(pp_size, 1):
        lines.append(f"[cmpfleet-sim] Xid {xid} on PP rank {rank}")
    return lines
