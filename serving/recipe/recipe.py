"""The launch recipe: a typed, validated description of how to start the engine.

A recipe is a TOML file (``fleetctl recipe lint|show FILE``, ``[serving] recipe = "path"``)
or a table embedded in the daemon config (``[serving.recipe]``). ``preset = "NAME"`` starts
from a built-in preset; the file's keys override it and the ``[env]`` and ``[speculative]``
tables merge key by key. Keys are checked strictly (no ``"4"`` for ``4``, no unknown
keys) because a typo in a 45-minute cold start is found 45 minutes late.

Two entry points: ``parse_recipe_table`` reports every problem as a ``Finding`` (the
linter lists them all), ``load_recipe``/``recipe_from_table`` raise ``RecipeError`` with
one line naming the source, the key and the problem.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from hwcheck.regular_file import read_regular
from serving.recipe.families import FAMILIES, NO_FAMILY, family_names
from serving.recipe.findings import Finding
from serving.recipe.flags import FlagOverride, find_flag, merge_flags, split_flags
from serving.recipe.masking import masked_findings
from serving.recipe.presets import PresetNotFound, preset_names, read_preset
from serving.recipe.reference import ReferenceFigures

RecipeMode = Literal["process", "docker", "podman"]
CONTAINER_MODES: frozenset[str] = frozenset({"docker", "podman"})

PARTITION_ENV = "VLLM_PP_LAYER_PARTITION"
VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"
DEVICE_ORDER_ENV = "CUDA_DEVICE_ORDER"
PYTHON_PLACEHOLDER = "{python}"
MERGED_TABLES: frozenset[str] = frozenset({"env", "speculative", "lint", "reference"})

_MAX_PRESET_DEPTH = 8
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GPU_ID_RE = re.compile(r"^[A-Za-z0-9-]+$")
_CONTAINER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Docker's RAMInBytes grammar: a number, an optional k/m/g/t/p unit, optional "i" and "b".
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?) ?([kmgtp])?i?b?$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}

_CONFIG = ConfigDict(extra="forbid", strict=True, frozen=True)
# Expected figures, not launch settings: changing them must not look like a new launch.
BASELINE_KEYS = (
    "expected_decode_tok_s",
    "expected_prefill_tok_s",
    "expected_reasoning_field",
    "reference",
)
# What the linter reads, never the engine: left out of the recipe hash as well, so a
# waiver or a family does not make a running engine look like another launch.
LINT_KEYS = ("family", "num_layers", "lint")
ReasoningField = Literal["reasoning", "reasoning_content"]

# Friendlier words than pydantic's for TOML users ("array", not "tuple").
_TYPE_WORDS = {
    "int_type": "should be an integer",
    "float_type": "should be a number",
    "string_type": "should be a string",
    "bool_type": "should be true or false",
    "tuple_type": "should be an array",
    "dict_type": "should be a table",
    "model_type": "should be a table",
}


class RecipeError(ValueError):
    """A recipe that cannot be used; the message is one line naming source, key, problem."""


def shm_size_bytes(text: str) -> int:
    """Bytes of a docker-style size (``"16g"``, ``"512m"``, ``"16GiB"``); ValueError if malformed."""
    match = _SIZE_RE.match(text.strip())
    if match is None:
        raise ValueError("not a size like '16g' or '512m'")
    number, unit = match.group(1), (match.group(2) or "").lower()
    return int(float(number) * _SIZE_UNITS[unit])


class Speculative(BaseModel):
    """``[speculative]``: vLLM's ``--speculative-config`` (DSpark with 5 tokens on DSV4).

    ``enabled = false`` serves without speculation (the recipes' ``--plain``): a recipe on
    a DSpark preset cannot drop the table (tables merge key by key), so it switches it
    off; ``method`` and ``num_speculative_tokens`` may then be left out. One switch, not a
    magic ``method = "none"``: a method is vLLM's word, and a typo of one is an error.
    """

    model_config = _CONFIG

    enabled: bool = True
    method: str | None = Field(default=None, min_length=1)
    num_speculative_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check_enabled(self) -> Speculative:
        if self.enabled and (self.method is None or self.num_speculative_tokens is None):
            raise ValueError(
                "needs method and num_speculative_tokens (or enabled = false to serve "
                "without speculation)"
            )
        return self

    def launch_dump(self) -> dict[str, Any] | None:
        """The table as the recipe hash sees it: None when off, ``enabled`` left out.

        A recipe written before the switch existed keeps its hash (its engine is not a
        drift after an upgrade), and a switched-off table is the same launch as none.
        """
        if not self.enabled:
            return None
        return {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}

    def config_json(self) -> str:
        """Compact JSON exactly as the seeds pass it: method first, no spaces."""
        payload = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        return json.dumps(payload, separators=(",", ":"))


class LintTable(BaseModel):
    """``[lint]``: ``waive = {"rule-id" = "why"}`` turns that rule's findings into notes.

    A working launch that a rule refuses (a measured 0.97 memory fraction) is kept with
    the owner's reason on record instead of being edited until the linter is satisfied.
    """

    model_config = _CONFIG

    waive: dict[str, Annotated[str, Field(min_length=1)]] = Field(default_factory=dict)


class Recipe(BaseModel):
    """One engine launch, after presets are applied. Treat ``env`` as read-only.

    ``port`` is where the engine answers on ``host`` (the published host port in container
    modes, where the engine itself listens on ``container_port`` inside the container);
    ``port = 0`` means the daemon picks a free loopback port at launch. ``command`` is the
    engine executable (``vllm serve``) in every mode: inside the container for container
    modes (set it to ``[]`` for an image whose entrypoint already is ``vllm serve``).
    ``"{python}"`` in ``command`` is replaced by the daemon's interpreter at build time.
    """

    model_config = _CONFIG

    mode: RecipeMode = "process"
    image: str | None = Field(default=None, min_length=1)
    command: tuple[Annotated[str, Field(min_length=1)], ...] = ("vllm", "serve")
    model: str = Field(min_length=1)
    served_model_name: str | None = Field(default=None, min_length=1)
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8000, ge=0, le=65535)
    pipeline_parallel_size: int | None = Field(default=None, ge=1)
    layer_partition: tuple[Annotated[int, Field(ge=1)], ...] | None = None
    kv_cache_dtype: str | None = Field(default=None, min_length=1)
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)
    extra_args: tuple[str, ...] = ()
    shm_size: str | None = None
    speculative: Speculative | None = None
    env: dict[str, str] = Field(default_factory=dict)
    container_name: str = "cmpfleet-engine"
    gpus: str = Field(default="all", min_length=1)
    mounts: tuple[str, ...] = ()
    ipc_host: bool = False
    container_port: int = Field(default=8000, ge=1, le=65535)
    # What this launch should do single-stream (the throughput canary's baseline) and
    # where its build returns reasoning (the reasoning canary's); not launch flags, so
    # not part of the recipe hash.
    expected_decode_tok_s: float | None = Field(default=None, gt=0)
    expected_prefill_tok_s: float | None = Field(default=None, gt=0)
    expected_reasoning_field: ReasoningField | None = None
    # The recipe's published figures and their source (``fleetctl bench`` judges by them).
    reference: ReferenceFigures | None = None
    # The model build whose rule set applies (``serving.recipe.families``); ``"none"``:
    # the generic vLLM rules only; unset: inferred from the checkpoint, the flags and the
    # model's name (``family_evidence``). ``num_layers``: the decoder layers, when the
    # checkpoint's config.json cannot be read from here. Lint input only.
    family: str | None = None
    num_layers: int | None = Field(default=None, ge=1)
    lint: LintTable = Field(default_factory=LintTable)
    # Set by the parser, never from a table: not a key, not part of the recipe hash.
    _preset_overrides: tuple[FlagOverride, ...] = PrivateAttr(default=())

    @field_validator("shm_size")
    @classmethod
    def _check_shm_size(cls, value: str | None) -> str | None:
        if value is not None:
            shm_size_bytes(value)
        return value

    @field_validator("env")
    @classmethod
    def _check_env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME_RE.match(name):
                raise ValueError(f"not a valid environment variable name: {name!r}")
        return value

    @field_validator("container_name")
    @classmethod
    def _check_container_name(cls, value: str) -> str:
        if not _CONTAINER_NAME_RE.match(value):
            raise ValueError(f"not a valid container name: {value!r}")
        return value

    @field_validator("mounts")
    @classmethod
    def _check_mounts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for mount in value:
            parts = mount.split(":")
            if len(parts) not in (2, 3) or not parts[0] or not parts[1].startswith("/"):
                raise ValueError(f"a mount is 'SOURCE:/TARGET[:OPTIONS]', got {mount!r}")
        return value

    @field_validator("gpus")
    @classmethod
    def _check_gpus(cls, value: str) -> str:
        if value != "all" and not all(_GPU_ID_RE.match(part) for part in value.split(",")):
            raise ValueError("'all' or a comma-separated list of card indices or UUIDs")
        return value

    @field_validator("family")
    @classmethod
    def _check_family(cls, value: str | None) -> str | None:
        if value is not None and value != NO_FAMILY and value not in FAMILIES:
            known = ", ".join([*family_names(), NO_FAMILY])
            raise ValueError(f"unknown family {value!r} (known: {known})")
        return value

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        if any(char.isspace() for char in value):
            raise ValueError(f"not a host address: {value!r}")
        return value

    @property
    def is_container(self) -> bool:
        """True in docker and podman modes."""
        return self.mode in CONTAINER_MODES

    @property
    def engine_name(self) -> str:
        """The name ``/v1/models`` will list, which readiness waits for.

        The typed key, else the first name of ``--served-model-name`` in ``extra_args``,
        else the model path (vLLM's default).
        """
        if self.served_model_name is not None:
            return self.served_model_name
        group = find_flag(split_flags(self.extra_args), "--served-model-name")
        if group is not None and group.values:
            return group.values[0]
        return self.model

    @property
    def speculation(self) -> Speculative | None:
        """``[speculative]`` when it is on (``enabled = false`` serves without it)."""
        spec = self.speculative
        return spec if spec is not None and spec.enabled else None

    @property
    def preset_overrides(self) -> tuple[FlagOverride, ...]:
        """The preset flags this recipe's ``extra_args`` gave again (empty without a preset)."""
        return self._preset_overrides

    @property
    def card_ids(self) -> tuple[str, ...] | None:
        """The cards named by ``gpus`` (indices or UUIDs, as written); None for ``"all"``."""
        if self.gpus == "all":
            return None
        return tuple(part.strip() for part in self.gpus.split(","))

    def effective_env(self) -> dict[str, str]:
        """``[env]`` plus ``VLLM_PP_LAYER_PARTITION`` from ``layer_partition`` (which wins).

        In process mode a ``gpus`` list also sets ``CUDA_VISIBLE_DEVICES`` (with
        ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so CUDA numbers the cards as NVML does) unless
        ``[env]`` sets them: the cards a profile names are the cards it runs on.
        """
        env = dict(self.env)
        if self.layer_partition is not None:
            env[PARTITION_ENV] = ",".join(str(layers) for layers in self.layer_partition)
        if self.mode == "process" and self.card_ids is not None:
            env.setdefault(VISIBLE_DEVICES_ENV, ",".join(self.card_ids))
            env.setdefault(DEVICE_ORDER_ENV, "PCI_BUS_ID")
        return env

    def canonical_json(self) -> str:
        """Sorted, compact JSON of the launch's fields: the input of the recipe hash.

        Expected figures and lint input are left out: they never change the launch.
        """
        launch = self.model_dump(mode="json", exclude={*BASELINE_KEYS, *LINT_KEYS})
        if self.speculative is not None:
            launch["speculative"] = self.speculative.launch_dump()
        return json.dumps(launch, sort_keys=True, separators=(",", ":"))


RECIPE_KEYS: frozenset[str] = frozenset({*Recipe.model_fields, "preset"})


def show_value(value: Any) -> str:
    """A value as text for findings: strings bare, arrays and tables as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | dict):
        return json.dumps(value)
    return str(value)


def toml_literal(value: Any) -> str:
    """A value as it would be written in TOML (strings quoted), for type errors."""
    if isinstance(value, str):
        return json.dumps(value)
    return show_value(value)


def error_line(source: str, finding: Finding) -> str:
    """The one-line ``RecipeError`` text for a parse finding."""
    if finding.rule == "unknown-key":
        return f"{source}: {finding.reason}"
    if finding.rule == "missing-key":
        return f"{source}: missing key '{finding.key}': {finding.reason}"
    got = f" (got {finding.value})" if finding.value else ""
    return f"{source}: key '{finding.key}': {finding.reason}{got}"


class _PresetProblem(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.reason)
        self.finding = finding


def _is_string_list(value: Any) -> TypeGuard[Sequence[str]]:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)


def _merge(
    base: Mapping[str, Any], override: Mapping[str, Any]
) -> tuple[dict[str, Any], list[FlagOverride]]:
    """Top-level keys replace; ``env`` and ``speculative`` merge key by key; flags add up.

    ``extra_args`` adds to the preset's: replacing the whole list silently dropped the
    preset's ``--trust-remote-code``, parsers and sizes, a cold start later found broken.
    Returns the merged table and the preset flags the override gave again.
    """
    merged = dict(base)
    overrides: list[FlagOverride] = []
    for key, value in override.items():
        old = merged.get(key)
        if key in MERGED_TABLES and isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = {**old, **value}
        elif key == "extra_args" and _is_string_list(old) and _is_string_list(value):
            merged[key], overrides = merge_flags(old, value)
        else:
            merged[key] = value
    return merged, overrides


def _apply_presets(
    table: Mapping[str, Any], depth: int = 0
) -> tuple[dict[str, Any], list[FlagOverride]]:
    """``table`` with its ``preset`` (and that preset's, recursively) merged underneath.

    The overrides returned are those of ``table`` itself against its whole preset chain.
    """
    if "preset" not in table:
        return dict(table), []
    name = table["preset"]
    own = {key: value for key, value in table.items() if key != "preset"}
    if not isinstance(name, str):
        raise _PresetProblem(
            Finding("invalid-value", "error", "preset", toml_literal(name), "should be a string")
        )
    if depth >= _MAX_PRESET_DEPTH:
        raise _PresetProblem(
            Finding("invalid-value", "error", "preset", toml_literal(name), "presets nest too deep")
        )
    try:
        base = read_preset(name)
    except PresetNotFound as exc:
        reason = f"no such preset (known: {', '.join(preset_names())})"
        raise _PresetProblem(
            Finding("unknown-preset", "error", "preset", toml_literal(name), reason)
        ) from exc
    return _merge(_apply_presets(base, depth + 1)[0], own)


def _freeze(value: Any) -> Any:
    """TOML arrays become tuples (the model is frozen and strict about it)."""
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    if isinstance(value, Mapping):
        return {key: _freeze(item) for key, item in value.items()}
    return value


def _loc_key(loc: tuple[int | str, ...]) -> str:
    key = ""
    for part in loc:
        if isinstance(part, int):
            key += f"[{part}]"
        else:
            key = f"{key}.{part}" if key else part
    return key


def _unknown_key_finding(loc: tuple[int | str, ...], value: Any) -> Finding:
    key = _loc_key(loc)
    if len(loc) == 1:
        known = sorted(RECIPE_KEYS)
    elif loc[0] == "speculative":
        known = sorted(Speculative.model_fields)
    elif loc[0] == "lint":
        known = sorted(LintTable.model_fields)
    else:
        known = []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return Finding("unknown-key", "error", key, show_value(value), f"unknown key '{key}'{hint}")


def _value_finding(error: Mapping[str, Any]) -> Finding:
    loc = tuple(error["loc"])
    key = _loc_key(loc)
    kind = error["type"]
    if kind == "missing":
        return Finding("missing-key", "error", key, "", "this key is required")
    message = _TYPE_WORDS.get(kind) or str(error["msg"]).removeprefix("Value error, ")
    return Finding("invalid-value", "error", key, toml_literal(error.get("input", "")), message)


def _drop(data: dict[str, Any], loc: tuple[int | str, ...]) -> None:
    holder: Any = data
    for part in loc[:-1]:
        holder = holder[part]
    del holder[loc[-1]]


def _validate(data: dict[str, Any]) -> tuple[Recipe | None, list[Finding]]:
    """Validate; unknown keys become findings and are dropped so the rest still checks."""
    findings: list[Finding] = []
    for _attempt in range(2):
        try:
            return Recipe.model_validate(data), findings
        except ValidationError as exc:
            errors = exc.errors()
        unknown = [error for error in errors if error["type"] == "extra_forbidden"]
        others = [error for error in errors if error["type"] != "extra_forbidden"]
        for error in unknown:
            findings.append(_unknown_key_finding(tuple(error["loc"]), error["input"]))
            _drop(data, tuple(error["loc"]))
        if others:
            findings.extend(_value_finding(error) for error in others)
            return None, findings
    return None, findings  # pragma: no cover - the second pass has no unknown keys left


def _structure_findings(recipe: Recipe) -> list[Finding]:
    """Rules that involve more than one key and make a recipe unlaunchable."""
    findings: list[Finding] = []
    if recipe.is_container and recipe.image is None:
        findings.append(
            Finding("missing-key", "error", "image", "", f"mode '{recipe.mode}' needs an image")
        )
    if recipe.mode == "process" and not recipe.command:
        findings.append(
            Finding("invalid-value", "error", "command", "[]", "process mode needs a command")
        )
    return findings


def parse_recipe_table(table: Mapping[str, Any]) -> tuple[Recipe | None, list[Finding]]:
    """Every problem of a recipe table as findings, and the recipe when it could be built.

    Unknown keys are reported and ignored (the recipe is still returned so the linter can
    check the rest); a wrong type or a missing key returns no recipe. Findings name keys,
    not the source: the caller prints them under the file or table name it knows.
    """
    try:
        merged, overrides = _apply_presets(table)
    except _PresetProblem as problem:
        return None, [problem.finding]
    recipe, findings = _validate(_freeze(merged))
    if recipe is not None:
        recipe._preset_overrides = tuple(overrides)
        findings.extend(_structure_findings(recipe))
    return recipe, findings


def recipe_from_table(table: Mapping[str, Any], source: str) -> Recipe:
    """A valid recipe from a table, or ``RecipeError`` naming ``source``, key and problem."""
    recipe, findings = parse_recipe_table(table)
    findings = masked_findings(findings, table)  # a bad value of a secret key is not echoed
    if findings:
        more = len(findings) - 1
        extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise RecipeError(error_line(source, findings[0]) + extra)
    if recipe is None:  # pragma: no cover - no findings means a recipe was built
        raise RecipeError(f"{source}: not a valid recipe")
    return recipe


def read_recipe_table(path: Path) -> dict[str, Any]:
    """The TOML table of a recipe file; ``RecipeError`` for unreadable files or bad TOML."""
    try:
        text = read_regular(path).decode("utf-8")  # a FIFO or a device: one line, no hang
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text: {exc.reason}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: TOML syntax error: {exc}") from exc


def load_recipe(path: Path) -> Recipe:
    """The recipe in TOML file ``path``; ``RecipeError`` (one line) when it is not valid."""
    return recipe_from_table(read_recipe_table(path), str(path))


def preset_recipe(name: str) -> Recipe:
    """A built-in preset as a recipe (``RecipeError`` for an unknown name)."""
    return recipe_from_table({"preset": name}, f"preset {name}")
