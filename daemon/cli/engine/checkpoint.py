"""fleetctl ``recipe verify`` and ``recipe manifest``: the checkpoint, checked on this host.

Run where the weights are (the rig): the checkpoint's directory itself, or a recipe FILE or
a configured profile that names the model, mapped back through the container's mounts as
the linter maps it. ``verify``
exits 0 when the checkpoint is whole, 2 when a shard is missing, short or unreadable (or
differs from the manifest with ``--full``), so a script can gate a 45-minute cold start
on it. ``manifest`` hashes every shard once (a progress line on a terminal).
"""

from __future__ import annotations

import time
from pathlib import Path

from daemon.cli.engine.recipe import configured_recipe, settings_or_none
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_CRITICAL, EXIT_INTERRUPTED, EXIT_OK, Output
from daemon.cli.waiting import end_progress, show_elapsed
from serving.recipe.checkpoint import (
    CheckpointError,
    Progress,
    VerifyMode,
    verify_checkpoint,
    write_manifest,
)
from serving.recipe.model_dir import host_model_path
from serving.recipe.recipe import Recipe, RecipeError, load_recipe


def checkpoint_directory(
    out: Output, file: Path | None, config: Path | None, profile: str | None
) -> Path:
    """The checkpoint to judge: FILE itself when it is the model's directory, else its model.

    An owner types the weights' directory as often as the recipe's file: both work.
    """
    if file is not None and file.is_dir():
        if profile is not None:
            out.fail(
                "give a checkpoint DIR, a recipe FILE or --profile NAME, not two", EXIT_BAD_INPUT
            )
        return file
    return model_directory(out, _recipe(out, file, config, profile))


def _recipe(out: Output, file: Path | None, config: Path | None, profile: str | None) -> Recipe:
    if file is not None and profile is not None:
        out.fail("give a recipe FILE or --profile NAME, not both", EXIT_BAD_INPUT)
    if file is None:
        return configured_recipe(out, config, settings_or_none(out, config), profile)[1]
    try:
        return load_recipe(file)
    except RecipeError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)


def model_directory(out: Output, recipe: Recipe) -> Path:
    """The recipe's checkpoint on this host, or one line saying why there is none here."""
    path = host_model_path(recipe.model, recipe.mounts, recipe.is_container)
    if path is None:
        where = "no mount covers it" if recipe.is_container else "not a path"
        out.fail(f"model {recipe.model!r}: {where}: no checkpoint on this host", EXIT_BAD_INPUT)
    return path


def _progress(out: Output, what: str) -> Progress:
    """A progress line on a terminal while shards are hashed (nothing into a pipe)."""
    started_s = time.monotonic()

    def show(done: int, total: int) -> None:
        share = done / total if total else 1.0
        show_elapsed(out, started_s, f"{what}: {share:6.1%} of {total / 2**30:,.1f} GiB hashed")

    return show


def _nothing() -> None:
    return None


def verify(
    out: Output,
    file: Path | None,
    config: Path | None,
    profile: str | None,
    full: bool,
) -> int:
    """``recipe verify [DIR | FILE | --profile NAME] [--full]``: 0 whole, 2 a bad shard."""
    directory = checkpoint_directory(out, file, config, profile)
    mode = VerifyMode.FULL if full else VerifyMode.QUICK
    finish = end_progress if full else _nothing  # quick mode shows no progress line
    try:
        report = verify_checkpoint(directory, mode, _progress(out, "verifying"))
    except CheckpointError as exc:
        finish()
        out.fail(str(exc), EXIT_CRITICAL)
    except KeyboardInterrupt:
        finish()
        out.fail("stopped: the checkpoint was not verified", EXIT_INTERRUPTED)
    finish()
    if out.json_mode:
        out.emit_json(report.to_dict())
    else:
        out.line(report.summary())
        for problem in report.problems[1:]:
            out.line(f"  {problem.line()}")
        for note in report.notes:
            out.line(f"  note: {note}")
    return EXIT_OK if report.ok else EXIT_CRITICAL


def manifest(out: Output, file: Path | None, config: Path | None, profile: str | None) -> int:
    """``recipe manifest``: hash every shard once into cmpfleet-manifest.json beside them."""
    directory = checkpoint_directory(out, file, config, profile)
    try:
        target, count = write_manifest(directory, _progress(out, "manifest"))
    except CheckpointError as exc:
        end_progress()
        out.fail(str(exc), EXIT_CRITICAL)
    except OSError as exc:
        end_progress()
        out.fail(f"{directory}: the manifest cannot be written: {exc.strerror}", EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        end_progress()
        out.fail("stopped: no manifest written", EXIT_INTERRUPTED)
    end_progress()
    if out.json_mode:
        out.emit_json({"manifest": str(target), "shards": count})
    else:
        out.line(f"{target}: {count} shards hashed (sha256)")
    return EXIT_OK
