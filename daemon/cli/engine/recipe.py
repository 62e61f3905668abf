"""fleetctl ``recipe lint`` and ``recipe show``: the launch recipe, read and judged locally.

Apart from the engine commands (``cmd_serving``) because they load the config, the profiles
and the recipe linter, which ``start``/``stop``/``logs`` never need: those stay quick.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, Output
from daemon.config import DEFAULT_CONFIG_PATH, ConfigError, Settings, load_cli_settings
from daemon.engine.profiles import profiles_for
from hwcheck.model import RigProfile
from serving.errors import NotFound
from serving.recipe.build import build_launch, diff_specs, show_text, spec_to_dict
from serving.recipe.findings import Finding, exit_code
from serving.recipe.lint import RigCards, lint_path, lint_recipe
from serving.recipe.masking import mask_spec
from serving.recipe.recipe import Recipe, RecipeError, load_recipe
from serving.recipe.spec import LaunchSpec


def _settings(out: Output, config: Path | None) -> Settings | None:
    """The config for lint (the rig's cards); an unreadable default config is skipped."""
    try:
        return load_cli_settings(config)
    except ConfigError as exc:
        if config is not None:
            out.fail(str(exc), EXIT_BAD_INPUT)
        return None


def _configured_recipe(
    out: Output, config: Path | None, settings: Settings | None, profile: str | None = None
) -> tuple[str, Recipe]:
    """``profile``'s recipe (the configured profile's without it), and its name."""
    if settings is None:
        settings = _settings(out, config) or Settings()
    try:
        profiles = profiles_for(settings, config or DEFAULT_CONFIG_PATH, None)
    except RecipeError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)
    if profiles is None:
        what = f"no profile {profile!r}" if profile else "no recipe given"
        out.fail(
            f"{what} and none configured ([serving] recipe or [serving.profiles.NAME] in "
            f"{config or DEFAULT_CONFIG_PATH}): pass a FILE or --config",
            EXIT_BAD_INPUT,
        )
    name = profile or profiles.configured
    try:
        return name, profiles.get(name).recipe
    except NotFound as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)


def lint(out: Output, file: Path | None, config: Path | None, profile: str | None = None) -> int:
    """``recipe lint [FILE | --profile NAME]``: 0 clean, 1 warnings only, 2 errors.

    The rig's ``[rig]`` card count and memory (from the config, when readable) judge the
    parallel sizes and whether the checkpoint fits. Without FILE: the profile NAME of the
    config (``--profile``), else the profile it autostarts.
    """
    if file is not None and profile is not None:
        out.fail("recipe lint takes a FILE or --profile NAME, not both", EXIT_BAD_INPUT)
    settings = _settings(out, config)
    rig = settings.rig if settings is not None else RigProfile()
    cards = RigCards(count=rig.card_count, expected_mib=rig.memory_total_mib)
    if file is not None:
        if not file.exists():
            out.fail(f"{file}: no such file", EXIT_BAD_INPUT)
        findings = lint_path(file, cards=cards)
        source = str(file)
    else:
        name, recipe = _configured_recipe(out, config, settings, profile)
        findings = lint_recipe(recipe, cards=cards)
        source = f"profile {name}"
    if out.json_mode:
        out.emit_json([f.to_dict() for f in findings])
    elif not findings:
        out.line(f"{source}: clean")
    else:
        out.line(f"{source}: {_counts(findings)}")
        for finding in findings:
            out.line(finding.line())
    return exit_code(findings)


def _counts(findings: list[Finding]) -> str:
    """``2 errors, 1 warning, 1 note``: the verdict's line under the recipe's name."""
    parts = []
    for severity in ("error", "warning", "note"):
        count = sum(1 for finding in findings if finding.severity == severity)
        if count:
            parts.append(f"{count} {severity}{'' if count == 1 else 's'}")
    return ", ".join(parts)


def _local_spec(out: Output, file: Path) -> LaunchSpec:
    """The file's launch, secrets masked as the daemon masks its own and its stored launches.

    Unmasked, a token would reach the terminal (and the pastes made of it), and a diff
    against the last ready launch (stored masked) would flag every secret as changed.
    """
    try:
        return mask_spec(build_launch(load_recipe(file)))
    except RecipeError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)


def _print_diff(out: Output, diff: list[str] | None, last_id: int | None) -> None:
    if diff is None:
        out.line("no launch has reached ready yet: nothing to diff against")
    elif not diff:
        out.line(f"same as the last ready launch (#{last_id})")
    else:
        for line in diff:
            out.line(line)


def _profile_spec(out: Output, config: Path | None, profile: str) -> LaunchSpec:
    """Profile ``profile``'s launch from the config, masked like the daemon's."""
    _, recipe = _configured_recipe(out, config, None, profile)
    try:
        return mask_spec(build_launch(recipe))
    except RecipeError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT)


def show(
    out: Output,
    client: FleetClient,
    file: Path | None,
    diff: bool,
    profile: str | None = None,
    config: Path | None = None,
) -> int:
    """``recipe show [FILE | --profile NAME] [--diff]``: exact argv and environment.

    ``--diff`` compares with the last launch that reached ready (fleetd's). Without FILE
    or ``--profile``: the profile in force, as fleetd would launch it.
    """
    if file is not None and profile is not None:
        out.fail("recipe show takes a FILE or --profile NAME, not both", EXIT_BAD_INPUT)
    local: LaunchSpec | None = None
    label = str(file)
    if profile is not None:
        local, label = _profile_spec(out, config, profile), f"profile {profile}"
    elif file is not None:
        local = _local_spec(out, file)
    if local is not None and not diff:
        spec = local
        if out.json_mode:
            out.emit_json(spec_to_dict(spec))
        else:
            out.line(show_text(spec))
        return 0
    try:
        document: dict[str, Any] = client.get("/api/v1/serving/recipe", needs_token=True)
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if local is not None:
        spec = local
        last = document["last_ready"]
        document = {"spec": spec_to_dict(spec), "text": show_text(spec), "last_ready": last}
        document["diff"] = None
        if last is not None:
            previous = dataclasses.replace(spec, argv=tuple(last["argv"]), env=dict(last["env"]))
            document["diff"] = diff_specs(
                previous, spec, old_label=f"last ready launch #{last['id']}", new_label=label
            )
    if out.json_mode:
        out.emit_json(document if diff else document["spec"])
        return 0
    out.line(document["text"])
    if diff:
        last = document["last_ready"]
        _print_diff(out, document["diff"], None if last is None else last["id"])
    return 0


def settings_or_none(out: Output, config: Path | None) -> Settings | None:
    """The config for a local recipe command (an unreadable default config is skipped)."""
    return _settings(out, config)


def configured_recipe(
    out: Output, config: Path | None, settings: Settings | None, profile: str | None = None
) -> tuple[str, Recipe]:
    """``profile``'s recipe (the configured profile's without it), and its name."""
    return _configured_recipe(out, config, settings, profile)
