"""The simulated rig's checkpoint (issue 43): V4 Flash's shards on disk, sparse, whole or short.

Judged by the real preflight (``verify_checkpoint``), and loaded by the real simulated
engine process, which dies on the short shard with safetensors' words, classified by the
product's crash classifier as ``checkpoint``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from serving.recipe.checkpoint import VerifyMode, verify_checkpoint
from serving.runtime.classify import explain_exit
from serving.runtime.crash_class import CrashClass
from serving.sim.checkpoint import (
    SHARDS,
    SHORT_SHARD,
    TOTAL_BYTES,
    CheckpointKind,
    ShardLoader,
    write_sim_checkpoint,
)
from serving.sim.scenario import EngineScenarioError, parse_engine_scenario
from tests.support.fleetd import free_port

ROOT = Path(__file__).resolve().parents[3]
SHORT_NAME = f"model-{SHORT_SHARD:05d}-of-{SHARDS:05d}.safetensors"


def test_the_whole_checkpoint_is_v4_flash_sized_and_passes_the_preflight(tmp_path: Path) -> None:
    directory = write_sim_checkpoint(tmp_path, CheckpointKind.WHOLE)
    report = verify_checkpoint(directory, VerifyMode.QUICK)
    assert report.ok, report.summary()
    assert report.shards == SHARDS
    assert report.total_bytes > TOTAL_BYTES  # the data plus each shard's header
    # Sparse: 155 GiB of layout, next to nothing on disk.
    used = sum(path.stat().st_blocks * 512 for path in directory.iterdir())
    assert used < 64 * 2**20, used


def test_the_truncated_one_is_refused_naming_the_short_shard(tmp_path: Path) -> None:
    directory = write_sim_checkpoint(tmp_path, CheckpointKind.TRUNCATED)
    report = verify_checkpoint(directory, VerifyMode.QUICK)
    assert [problem.file for problem in report.problems] == [SHORT_NAME]
    assert "short" in report.summary() and SHORT_NAME in report.summary()


def test_it_is_written_once_so_a_repair_between_starts_stays(tmp_path: Path) -> None:
    directory = write_sim_checkpoint(tmp_path, CheckpointKind.TRUNCATED)
    whole = write_sim_checkpoint(tmp_path / "other", CheckpointKind.WHOLE)
    os.truncate(directory / SHORT_NAME, (whole / SHORT_NAME).stat().st_size)  # copied again
    assert write_sim_checkpoint(tmp_path, CheckpointKind.TRUNCATED) == directory
    assert verify_checkpoint(directory, VerifyMode.QUICK).ok
    # Each kind in its own directory: a state dir reused by another scenario never mixes them.
    assert write_sim_checkpoint(tmp_path, CheckpointKind.WHOLE) != directory


def test_loading_fails_on_the_short_shard_and_not_before(tmp_path: Path) -> None:
    directory = write_sim_checkpoint(tmp_path, CheckpointKind.TRUNCATED)
    loader = ShardLoader.of(str(directory))
    assert loader is not None and len(loader.names) == SHARDS
    assert loader.load_until(SHORT_SHARD - 1) is None
    problem = loader.load_until(SHARDS)
    assert problem is not None and problem.file == SHORT_NAME
    assert ShardLoader.of("dsv4-sim") is None  # a model name loads nothing


def test_the_simulated_engine_dies_loading_it_as_vllm_does(tmp_path: Path) -> None:
    """Exit 1 while starting, safetensors' line in a worker's traceback: class ``checkpoint``."""
    directory = write_sim_checkpoint(tmp_path, CheckpointKind.TRUNCATED)
    argv = [sys.executable, "-m", "serving.sim.engine", "serve", str(directory)]
    argv += ["--port", str(free_port()), "--pipeline-parallel-size", "4"]
    argv += ["--sim-ready-after-s", "0.5"]
    done = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 1, lines[-10:]
    assert not any("Application startup complete" in line for line in lines)
    verdict = explain_exit(lines[-200:], done.returncode, None)
    assert verdict.crash_class is CrashClass.CHECKPOINT, verdict
    assert "file not fully covered" in (verdict.evidence or "")


def test_a_scenario_names_a_kind_of_checkpoint_or_is_refused_in_one_line() -> None:
    assert parse_engine_scenario({"checkpoint": "truncated"}, "x.toml").checkpoint is (
        CheckpointKind.TRUNCATED
    )
    assert parse_engine_scenario({}, "x.toml").checkpoint is CheckpointKind.NONE
    with pytest.raises(EngineScenarioError, match=r'engine\.checkpoint: one of "whole", "trunc'):
        parse_engine_scenario({"checkpoint": "half"}, "x.toml")
