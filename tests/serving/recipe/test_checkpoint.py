"""The checkpoint checked before a cold start: shards, sizes, headers, and the manifest.

Real safetensors layouts made sparse (real headers, holes for the data): a 160 GiB
checkpoint costs no disk and is judged exactly as a real one would be.
"""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest

from daemon.engine.preflight import checkpoint_refusals
from serving.recipe.checkpoint import (
    INDEX_NAME,
    MANIFEST_NAME,
    CheckpointError,
    VerifyMode,
    min_mode,
    safetensors_expected_size,
    verify_checkpoint,
    write_manifest,
    write_sparse_checkpoint,
)
from serving.recipe.recipe import recipe_from_table
from tests.support.cli import run_fleetctl_here

GIB = 2**30


def _shrink(path: Path, by_bytes: int) -> None:
    os.truncate(path, path.stat().st_size - by_bytes)


def _recipe_toml(tmp_path: Path, model: Path) -> Path:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(f'mode = "process"\ncommand = ["vllm", "serve"]\nmodel = "{model}"\n')
    return recipe


def test_a_whole_sparse_layout_passes_and_sizes_add_up(tmp_path: Path) -> None:
    names = write_sparse_checkpoint(tmp_path / "m", [3 * GIB, 3 * GIB, GIB // 2])
    report = verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)
    assert report.ok, report.problems
    assert report.shards == 3
    assert report.total_bytes >= 6 * GIB + GIB // 2
    first = tmp_path / "m" / names[0]
    assert safetensors_expected_size(first) == first.stat().st_size


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda p: _shrink(p, 1024), "1,024 bytes short"),
        (lambda p: p.unlink(), "missing (the index names it)"),
        (lambda p: p.write_bytes(b"\x00" * 4), "unreadable header"),
        (lambda p: p.write_bytes(struct.pack("<Q", 10**12) + b"{}"), "not a safetensors header"),
        (lambda p: os.truncate(p, p.stat().st_size + 7), "7 bytes longer"),
    ],
    ids=["truncated", "missing", "no-header", "absurd-header", "longer"],
)
def test_each_kind_of_broken_shard_is_named(tmp_path: Path, damage, expected: str) -> None:  # type: ignore[no-untyped-def]
    names = write_sparse_checkpoint(tmp_path / "m", [GIB, GIB, GIB])
    damage(tmp_path / "m" / names[1])
    report = verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)
    assert [p.file for p in report.problems] == [names[1]]
    assert expected in report.problems[0].what
    assert names[1] in report.summary()


def test_a_fifo_named_as_a_shard_is_refused_without_blocking(tmp_path: Path) -> None:
    names = write_sparse_checkpoint(tmp_path / "m", [GIB, GIB])
    (tmp_path / "m" / names[0]).unlink()
    os.mkfifo(tmp_path / "m" / names[0])
    report = verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)
    assert "not a regular file" in report.problems[0].what


def test_a_broken_index_or_an_empty_dir_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(CheckpointError, match="no weight files"):
        verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)
    (tmp_path / "m" / INDEX_NAME).write_text("{not json")
    with pytest.raises(CheckpointError, match="not a readable index"):
        verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)
    (tmp_path / "m" / INDEX_NAME).write_text(json.dumps({"weight_map": {"a": "../x"}}))
    with pytest.raises(CheckpointError, match="not a file name"):
        verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)


def test_full_finds_a_flipped_byte_that_quick_cannot(tmp_path: Path) -> None:
    names = write_sparse_checkpoint(tmp_path / "m", [4 << 20, 4 << 20])
    seen: list[tuple[int, int]] = []
    target, count = write_manifest(tmp_path / "m", lambda done, total: seen.append((done, total)))
    assert (target.name, count) == (MANIFEST_NAME, 2)
    assert seen[-1][0] == seen[-1][1] > 8 << 20  # progress reaches the whole
    assert verify_checkpoint(tmp_path / "m", VerifyMode.FULL).ok
    with open(tmp_path / "m" / names[1], "r+b") as shard:
        shard.seek(3 << 20)
        shard.write(b"\x01")
    assert verify_checkpoint(tmp_path / "m", VerifyMode.QUICK).ok
    full = verify_checkpoint(tmp_path / "m", VerifyMode.FULL)
    assert [(p.file, "sha256" in p.what) for p in full.problems] == [(names[1], True)]


def test_full_without_a_manifest_says_how_to_write_one(tmp_path: Path) -> None:
    write_sparse_checkpoint(tmp_path / "m", [1 << 20])
    with pytest.raises(CheckpointError, match="fleetctl recipe manifest"):
        verify_checkpoint(tmp_path / "m", VerifyMode.FULL)


def test_no_manifest_of_a_truncated_checkpoint(tmp_path: Path) -> None:
    names = write_sparse_checkpoint(tmp_path / "m", [1 << 20, 1 << 20])
    _shrink(tmp_path / "m" / names[0], 10)
    with pytest.raises(CheckpointError, match="no manifest written"):
        write_manifest(tmp_path / "m")
    assert not (tmp_path / "m" / MANIFEST_NAME).exists()


def test_the_start_preflight_refuses_a_short_shard_and_passes_what_it_cannot_see(
    tmp_path: Path,
) -> None:
    names = write_sparse_checkpoint(tmp_path / "m", [GIB, GIB])
    recipe = recipe_from_table(
        {"mode": "process", "command": ["vllm", "serve"], "model": str(tmp_path / "m")}, "test"
    )
    assert checkpoint_refusals(recipe, VerifyMode.QUICK) == []
    _shrink(tmp_path / "m" / names[1], 1)
    (refusal,) = checkpoint_refusals(recipe, VerifyMode.QUICK)
    assert refusal.code == "checkpoint" and names[1] in refusal.message
    assert "\n" not in refusal.message
    assert checkpoint_refusals(recipe, VerifyMode.OFF) == []
    hub = recipe_from_table(
        {"mode": "process", "command": ["vllm", "serve"], "model": "org/name"}, "test"
    )
    assert checkpoint_refusals(hub, VerifyMode.QUICK) == []
    assert min_mode(VerifyMode.FULL, VerifyMode.QUICK) is VerifyMode.QUICK


def test_recipe_verify_refuses_a_160_gib_layout_with_one_short_shard_in_under_2_s(
    tmp_path: Path,
) -> None:
    """The issue's figure: one line, exit 2, quick mode over 32 sparse 5 GiB shards."""
    names = write_sparse_checkpoint(tmp_path / "m", [5 * GIB] * 32)
    _shrink(tmp_path / "m" / names[17], 4096)
    recipe = _recipe_toml(tmp_path, tmp_path / "m")
    started = time.monotonic()
    report = verify_checkpoint(tmp_path / "m", VerifyMode.QUICK)
    assert time.monotonic() - started < 2.0
    assert [p.file for p in report.problems] == [names[17]]
    done = run_fleetctl_here("recipe", "verify", str(recipe))
    assert done.returncode == 2, done.stderr
    assert done.stdout.count("\n") == 1 and names[17] in done.stdout
    whole = run_fleetctl_here("recipe", "verify", str(recipe), "--json")
    assert json.loads(whole.stdout)["problems"][0]["file"] == names[17]


def test_recipe_manifest_then_verify_full_from_the_cli(tmp_path: Path) -> None:
    write_sparse_checkpoint(tmp_path / "m", [1 << 20, 2 << 20])
    recipe = _recipe_toml(tmp_path, tmp_path / "m")
    written = run_fleetctl_here("recipe", "manifest", str(recipe), "--json")
    assert written.returncode == 0, written.stderr
    assert json.loads(written.stdout)["shards"] == 2
    checked = run_fleetctl_here("recipe", "verify", str(recipe), "--full")
    assert checked.returncode == 0, checked.stderr
    assert "whole (full)" in checked.stdout
    hub = tmp_path / "hub.toml"
    hub.write_text('mode = "process"\ncommand = ["vllm", "serve"]\nmodel = "org/name"\n')
    none = run_fleetctl_here("recipe", "verify", str(hub))
    assert none.returncode == 2 and "no checkpoint on this host" in none.stderr
    assert "Traceback" not in none.stderr
