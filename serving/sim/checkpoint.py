"""The simulated rig's checkpoint: V4 Flash's shard layout on disk, whole or with a short shard.

A scenario's ``[engine] checkpoint`` asks for it (issue 43): ``"whole"`` is 46 shards of
V4 Flash's 155.4 GiB with real safetensors headers and holes for the data (it costs no
disk); ``"truncated"`` is the same with shard 27 cut at 58%, as a copy or a download that
stopped leaves it. fleetd's simulated rig writes it into its state dir and the simulated
recipe's ``model`` names it, so the start's preflight (``[serving] verify_checkpoint``),
``fleetctl recipe verify`` and ``recipe manifest`` judge it exactly as a real one.

With the preflight off the simulated engine loads the shards at its progress pace through
the same check (``serving.recipe.checkpoint.check_shard``) and dies on the short one with
safetensors' own error, in a worker's traceback, as vLLM does 20 to 45 minutes into a real
cold start: the failure the preflight exists to prevent, with the log a crash is named from.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path

from serving.recipe.checkpoint import (
    INDEX_NAME,
    ShardProblem,
    check_shard,
    shard_names,
    write_sparse_checkpoint,
)

CHECKPOINT_DIR = "sim-checkpoint"  # in fleetd's state dir
MODEL_DIR = "DeepSeek-V4-Flash"
SHARDS = 46
TOTAL_BYTES = int(155.4 * 2**30)  # V4 Flash's weights (docs/domain.md)
SHORT_SHARD = 27  # 1-based: the one a "truncated" checkpoint cuts
SHORT_KEEPS_PCT = 58


class CheckpointKind(StrEnum):
    """``[engine] checkpoint``: none (the model is a name), whole, or one shard short."""

    NONE = ""
    WHOLE = "whole"
    TRUNCATED = "truncated"


def shard_sizes() -> list[int]:
    """46 even shards adding up to ``TOTAL_BYTES`` (the last takes the remainder)."""
    each = TOTAL_BYTES // SHARDS
    return [each] * (SHARDS - 1) + [TOTAL_BYTES - each * (SHARDS - 1)]


def checkpoint_dir(root: Path, kind: CheckpointKind) -> Path:
    """Where the checkpoint of ``kind`` lives under ``root`` (the state dir's ``sim-checkpoint``)."""
    return root / kind.value / MODEL_DIR


def write_sim_checkpoint(root: Path, kind: CheckpointKind) -> Path:
    """The checkpoint of ``kind`` under ``root``, written once; its directory.

    Each kind has its own directory, so a state dir reused by another scenario never
    serves the wrong one. An existing checkpoint is left as it is (a test, or a person
    repairing a shard, changes it between starts); the index is written last, so a write
    cut short is written again at the next start.
    """
    directory = checkpoint_dir(root, kind)
    if (directory / INDEX_NAME).is_file():
        return directory
    # In fleetd's state dir: private like the rest of it (whatever the umask).
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.chmod(0o700)
    names = write_sparse_checkpoint(directory, shard_sizes())
    if kind is CheckpointKind.TRUNCATED:
        short = directory / names[SHORT_SHARD - 1]
        os.truncate(short, short.stat().st_size * SHORT_KEEPS_PCT // 100)
    return directory


class ShardLoader:
    """The simulated engine's weight loading: shards checked in order as progress passes them."""

    def __init__(self, directory: Path, names: list[str]) -> None:
        self.directory = directory
        self.names = names
        self.loaded = 0

    @classmethod
    def of(cls, model: str) -> ShardLoader | None:
        """The loader of ``model`` when it is a checkpoint directory; None for a name."""
        directory = Path(model)
        if not directory.is_absolute() or not (directory / INDEX_NAME).is_file():
            return None
        try:
            names = shard_names(directory)
        except Exception:
            return None
        return cls(directory, names) if names else None

    def load_until(self, count: int) -> ShardProblem | None:
        """Load shards up to ``count`` (of ``len(names)``); the first that fails, or None."""
        while self.loaded < min(count, len(self.names)):
            _, problem = check_shard(self.directory, self.names[self.loaded])
            self.loaded += 1
            if problem is not None:
                return problem
        return None


def load_failure_lines(problem: ShardProblem, pp_size: int, pid: int) -> list[str]:
    """What vLLM prints when a worker cannot read a shard: the traceback, then the core's end.

    The last line of the worker's traceback is safetensors' own error (safetensors >= 0.6
    words ``MetadataIncompleteBuffer`` as "incomplete metadata, file not fully covered");
    vLLM names no file, which is why the preflight's line does.
    """
    lines: list[str] = []
    for rank in range(max(pp_size, 1)):
        worker = f"(Worker_PP{rank} pid={pid + 1 + rank})"
        lines += [
            f"{worker} ERROR [multiproc_executor.py:597] WorkerProc failed to start.",
            f"{worker} ERROR [multiproc_executor.py:597] Traceback (most recent call last):",
            f'{worker} ERROR [multiproc_executor.py:597]   File "/opt/vllm/vllm/model_executor/'
            'model_loader/weight_utils.py", line 506, in safetensors_weights_iterator',
            f"{worker} ERROR [multiproc_executor.py:597]     with safe_open(st_file, "
            'framework="pt") as f:',
            f"{worker} ERROR [multiproc_executor.py:597] safetensors_rust.SafetensorError: "
            f"Error while deserializing header: {_safetensors_words(problem)}",
        ]
    lines += [
        f"(EngineCore_0 pid={pid}) ERROR [core.py:708] EngineCore failed to start.",
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}",
    ]
    return lines


def _safetensors_words(problem: ShardProblem) -> str:
    """safetensors' error for what ``check_shard`` found: a bad header, else a size off."""
    if "header" in problem.what:
        return "InvalidHeaderDeserialization"
    return "incomplete metadata, file not fully covered"
