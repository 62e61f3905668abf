"""The recipe linter: what the seeds learned the hard way, checked before a cold start.

Two kinds of rules: the generic vLLM rules every recipe gets (``rules_generic``, plus
fits-the-cards in ``fit``) and the rule set of the model build a recipe names with
``family`` (``rulesets``), or, without the key, of the build the evidence points at
(``family_evidence``: the checkpoint, the flags, the model's name; a note says which);
``family = "none"`` gets the generic rules only. Each finding
has a rule id, names the recipe key it is about (or the flag, for ``extra_args``), the
offending value and the reason. Rules about the recipe itself are errors when the launch
would crash, wedge a card or lose most of the throughput, warnings when it only degrades;
rules that depend on this host (port taken, model path or program missing) are always
warnings, since the recipe may be meant for another machine.

``[lint] waive = {"rule-id" = "why"}`` turns that rule's findings into notes showing the
reason (a waiver of an id no rule has is an error). ``exit_code`` maps findings to
``recipe lint``'s status: notes never change it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from serving.recipe.family_evidence import FamilyChoice, choose_family
from serving.recipe.findings import EXIT_CLEAN, EXIT_ERRORS, EXIT_WARNINGS, Finding, exit_code
from serving.recipe.fit import FIT_RULE_IDS, rule_fits_cards
from serving.recipe.launcher_script import ScriptFacts, read_script, script_path
from serving.recipe.lint_context import LintContext, RigCards
from serving.recipe.masking import masked_findings
from serving.recipe.model_dir import ModelFacts, host_model_path, read_model_dir
from serving.recipe.recipe import (
    PYTHON_PLACEHOLDER,
    Recipe,
    RecipeError,
    parse_recipe_table,
    read_recipe_table,
)
from serving.recipe.rules_generic import GENERIC_RULE_IDS, GENERIC_RULES
from serving.recipe.rulesets import RULE_SETS
from serving.runtime import ports

__all__ = [
    "EXIT_CLEAN",
    "EXIT_ERRORS",
    "EXIT_WARNINGS",
    "Finding",
    "RigCards",
    "exit_code",
    "lint_path",
    "lint_recipe",
    "waivable_rule_ids",
]

PortProbe = Callable[[str, int], bool]

HOST_RULE_IDS = frozenset(
    {"port-check", "port-in-use", "command-not-found", "mount-source", "model-path"}
)
SCRIPT_RULE_IDS = frozenset({"module-reload", "launcher-script"})


def waivable_rule_ids() -> frozenset[str]:
    """Every rule id a waiver may name: the generic rules, every family's, the host's."""
    ids = set(GENERIC_RULE_IDS | FIT_RULE_IDS | HOST_RULE_IDS | SCRIPT_RULE_IDS)
    for rule_set in RULE_SETS.values():
        ids |= rule_set.rule_ids
    return frozenset(ids)


def _family_note(choice: FamilyChoice) -> list[Finding]:
    """The note naming the evidence that chose (or overruled) an inferred family."""
    reason = choice.note()
    if reason is None:
        return []
    shown = choice.family.name if choice.family is not None else "none"
    return [Finding("family-inferred", "note", "family", shown, reason)]


def launcher_script(recipe: Recipe, base: Path | None) -> ScriptFacts | None:
    """The launcher script a process recipe runs, read (bounded, never run), or None."""
    if recipe.is_container:
        return None
    path = script_path(recipe.command)
    return None if path is None else read_script(path, base)


def _script_findings(script: ScriptFacts | None) -> list[Finding]:
    """A module reload inside the launcher is an error; an unreadable one a warning."""
    if script is None:
        return []
    if script.unreadable is not None:
        reason = (
            f"cannot read the launcher script ({script.unreadable}): its exports are not "
            "seen, so environment rules judge [env] alone"
        )
        return [Finding("launcher-script", "warning", "command", script.path, reason)]
    reason = (
        "unloading nvidia_uvm (or any NVIDIA module) to clear a wedge turned one Xid 31 into "
        "Xid 154 on all four cards of a PP job, and only a reboot recovered "
        "(tim-odonnell, 2026-09-29): remove it and reboot instead (fleetctl reboot)"
    )
    return [
        Finding("module-reload", "error", "command", f"{script.path}:{line}: {text}", reason)
        for line, text in script.module_reloads
    ]


def _rule_findings(ctx: LintContext) -> list[Finding]:
    """The generic rules, then the family's; generic ids the family replaces are dropped."""
    rule_set = None if ctx.family is None else RULE_SETS.get(ctx.family.name)
    replaced = rule_set.overrides if rule_set is not None and ctx.fork else frozenset()
    findings = [
        finding
        for rule in (*GENERIC_RULES, rule_fits_cards)
        for finding in rule(ctx)
        if finding.rule not in replaced
    ]
    if rule_set is not None:
        for rule in (*rule_set.rules, *(rule_set.fork_rules if ctx.fork else ())):
            findings += rule(ctx)
    return findings


def apply_waivers(recipe: Recipe, findings: list[Finding]) -> list[Finding]:
    """Waived findings become notes with the owner's reason; unknown waiver ids are errors."""
    waive = recipe.lint.waive
    if not waive:
        return findings
    known = waivable_rule_ids()
    out = [
        replace(finding, severity="note", waived=waive[finding.rule])
        if finding.rule in waive and finding.severity != "note"
        else finding
        for finding in findings
    ]
    for rule, why in waive.items():
        if rule not in known:
            reason = f"no lint rule has this id (known: {', '.join(sorted(known))})"
            out.append(Finding("unknown-waiver", "error", f"lint.waive.{rule}", why, reason))
    return out


def _looks_like_path(text: str) -> bool:
    """Absolute, home or explicitly relative; a bare name or ``org/model`` is a hub id."""
    return text.startswith(("/", "~", "./", "../"))


def _program_found(program: str) -> bool:
    if os.sep in program:
        return os.access(Path(program).expanduser(), os.X_OK)
    return shutil.which(program) is not None


def _host_findings(recipe: Recipe, probe: PortProbe, python: str) -> list[Finding]:
    findings = []
    if recipe.port != 0:
        try:
            taken = probe(recipe.host, recipe.port)
        except OSError as exc:
            reason = f"cannot bind {recipe.host}: {exc.strerror or exc}"
            findings.append(Finding("port-check", "warning", "host", recipe.host, reason))
        else:
            if taken:
                reason = f"something already listens on {recipe.host}:{recipe.port}"
                findings.append(Finding("port-in-use", "warning", "port", str(recipe.port), reason))
    if recipe.is_container:
        if shutil.which(recipe.mode) is None:
            reason = f"`{recipe.mode}` is not on PATH"
            findings.append(Finding("command-not-found", "warning", "mode", recipe.mode, reason))
        for index, mount in enumerate(recipe.mounts):
            source = mount.split(":")[0]
            if _looks_like_path(source) and not Path(source).expanduser().exists():
                reason = f"mount source {source} does not exist on this host"
                findings.append(
                    Finding("mount-source", "warning", f"mounts[{index}]", mount, reason)
                )
        return findings
    program = recipe.command[0].replace(PYTHON_PLACEHOLDER, python)
    if not _program_found(program):
        reason = f"`{program}` is not an executable on PATH"
        findings.append(Finding("command-not-found", "warning", "command", program, reason))
    if _looks_like_path(recipe.model) and not Path(recipe.model).expanduser().exists():
        reason = "no such file or directory on this host"
        findings.append(Finding("model-path", "warning", "model", recipe.model, reason))
    return findings


def model_facts(recipe: Recipe) -> ModelFacts | None:
    """The model directory's facts when it is readable from this host (mounts mapped)."""
    path = host_model_path(recipe.model, recipe.mounts, recipe.is_container)
    return None if path is None else read_model_dir(path)


def lint_recipe(
    recipe_or_table: Recipe | Mapping[str, Any],
    *,
    host_checks: bool = True,
    port_in_use: PortProbe | None = None,
    python: str = sys.executable,
    cards: RigCards | None = None,
    model: ModelFacts | bool | None = True,
    model_layers: int | None = None,
    labels: Mapping[str, str] | None = None,
    script_base: Path | None = None,
) -> list[Finding]:
    """Every finding for a recipe, or for a raw table (then unknown keys are findings too).

    ``host_checks`` adds this host's warnings (port taken, model path, program on PATH);
    ``port_in_use`` replaces the real bind probe; ``python`` resolves ``{python}`` in
    ``command``. ``cards`` are the rig's cards as far as the caller knows them (parallel
    sizes, fits-the-cards). ``model``: the model directory's facts, ``True`` to read them
    from this host (the default), ``False``/``None`` for none. ``model_layers`` overrides
    the layer count the partition must sum to. ``labels``: the image's provenance labels
    when known (evidence of the fork). ``script_base``: where a relative launcher script
    is (the recipe file's folder; the working directory by default).
    """
    if isinstance(recipe_or_table, Recipe):
        recipe: Recipe | None = recipe_or_table
        findings: list[Finding] = []
    else:
        recipe, findings = parse_recipe_table(recipe_or_table)
    if recipe is None:
        return masked_findings(findings, dict(recipe_or_table))
    facts = model_facts(recipe) if model is True else (model or None)
    script = launcher_script(recipe, script_base)
    env = {**(script.exports if script is not None else {}), **recipe.env}
    choice = choose_family(recipe, facts, env=env, labels=labels)
    ctx = LintContext(
        recipe,
        model=facts,
        cards=cards or RigCards(),
        family=choice.family,
        layers_override=model_layers,
        env=env,
        fork=bool(choice.fork),
    )
    findings += _family_note(choice)
    findings += _script_findings(script)
    findings += _rule_findings(ctx)
    if host_checks:
        findings += _host_findings(recipe, port_in_use or ports.port_in_use, python)
    launch = {"extra_args": recipe.extra_args, "env": env}
    return masked_findings(apply_waivers(recipe, findings), launch)  # never a secret shown


def lint_path(
    path: Path,
    *,
    host_checks: bool = True,
    port_in_use: PortProbe | None = None,
    python: str = sys.executable,
    cards: RigCards | None = None,
) -> list[Finding]:
    """``lint_recipe`` on a TOML file; an unreadable file or bad TOML is one error finding."""
    try:
        table = read_recipe_table(path)
    except RecipeError as exc:
        return [Finding("unreadable", "error", "", str(path), str(exc))]
    return lint_recipe(
        table,
        host_checks=host_checks,
        port_in_use=port_in_use,
        python=python,
        cards=cards,
        script_base=path.parent,
    )
