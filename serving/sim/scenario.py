"""The ``[engine]`` part of a scenario file: how the simulated engine behaves, as its flags.

A scenario file describes a whole simulated rig; hwcheck reads the hardware parts and
keeps the ``[engine]`` table raw, unread (it is serving's business). This module turns
that table into an ``EngineScenario`` and the engine into ``--sim-*`` flags, so the
daemon builds the simulated engine without reaching into the hardware package. A bad
value is an ``EngineScenarioError`` whose message is one line naming the file and key,
in the same words as the rest of the scenario's errors.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from serving.sim.checkpoint import CheckpointKind
from serving.sim.leaks import LEAK_MODES
from serving.sim.options import REASONING_FIELDS

RIG_TIME_SCALE = 98.1 / 30.0  # the reference rig's 98.1 tok/s at the default 30 tok/s pace


class EngineScenarioError(ValueError):
    """A bad ``[engine]`` table; the message is one line naming file and key."""


@dataclass(frozen=True, slots=True)
class EngineScenario:
    """How the simulated engine behaves. Times count from its start; ``None`` means never."""

    ready_after_s: float = 5.0
    crash_after_s: float | None = None
    hang_after_s: float | None = None
    ignore_sigint: bool = False
    ignore_signals: bool = False  # SIGINT and SIGTERM: a stop that will not take
    tokens_per_s: float = 30.0
    prefill_tokens_per_s: float = 1600.0
    corrupt_identifiers_pct: float = 0.0
    leak_dsml: bool = False
    leak_mode: str = ""  # ``--sim-leak-mode`` (``serving.sim.leaks``)
    reasoning_field: str = "both"
    log_lines: tuple[tuple[float, str], ...] = ()  # (seconds after ready, line)
    # Long-context defects (``serving.sim.defects``); context lengths in tokens.
    corrupt_band_tokens: tuple[int, int] | None = None
    corrupt_band_pct: float = 85.0
    loop_after_tokens: int | None = None
    recall_full_until_tokens: int | None = None
    recall_floor: float = 0.3
    recall_floor_at_tokens: int | None = None
    drift: bool = False
    prefill_pace_max_tokens: int = 8192
    # Speculative decoding (``serving.sim.vllm_metrics``); ``speculative = false`` drops
    # the recipe's ``[speculative]`` (a build served without DSpark).
    speculative: bool = True
    spec_acceptance: float = 0.6
    spec_collapse_after_s: float | None = None
    spec_collapsed_acceptance: float = 0.15
    # A crash at depth (``serving.sim.crash_depth``): the first request this deep kills the
    # engine on PP rank ``crash_rank`` (None: the last) with an Xid 31 on its card.
    crash_at_depth_tokens: int | None = None
    crash_rank: int | None = None
    # The simulated recipe's ``DSV4_LOGITS_ROW_CHUNK`` (None: the preset's 64; 0: unset, its
    # lint error waived: the ``depth-crash`` scenario's launch).
    logits_row_chunk: int | None = None
    # Wall seconds per real rig second (``serving.sim.perf``): at the default pace (30 tok/s
    # decode, 1,600 prefill) the bench reports the PP4 DSpark rig's 98.1 and about 5,230.
    time_scale: float = RIG_TIME_SCALE
    # The checkpoint on disk (``serving.sim.checkpoint``): none (the model is a name), a
    # whole sparse copy of V4 Flash's shards, or one with a truncated shard.
    checkpoint: CheckpointKind = CheckpointKind.NONE


MAX_SECONDS = 365 * 86_400.0
MAX_TIME_SCALE = 1000.0  # a simulated engine's timers: at most a year


class _Bad(Exception):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"engine.{key}: {problem}")


def _shown(value: object) -> str:
    """A TOML value as the error message shows it: ``"text"``, ``1``, ``true``, a table."""
    if isinstance(value, dict | list):
        return "a table" if isinstance(value, dict) else "a list"
    return json.dumps(value, default=str)


def _number(table: Mapping[str, object], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(key, f"expected a number, got {_shown(value)}")
    if not math.isfinite(value):
        raise _Bad(key, f"expected a finite number, got {value}")
    return float(value)


def _seconds(table: Mapping[str, object], key: str) -> float | None:
    """Seconds from 0 to a year: a simulated engine's timers, never ``1e308``."""
    if table.get(key) is None:
        return None
    seconds = _number(table, key, 0.0)
    if not 0 <= seconds <= MAX_SECONDS:
        raise _Bad(key, f"must be 0 to {MAX_SECONDS:.0f} seconds (a year), got {seconds:g}")
    return seconds


def _flag(table: Mapping[str, object], key: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise _Bad(key, f"expected true or false, got {_shown(value)}")
    return value


def _build(table: Mapping[str, object]) -> EngineScenario:
    known = sorted(f.name for f in fields(EngineScenario))
    for key in table:
        if key not in known:
            raise _Bad(key, f"unknown key (known: {', '.join(known)})")
    defaults = EngineScenario()
    pct = _number(table, "corrupt_identifiers_pct", 0.0)
    if not 0.0 <= pct <= 100.0:
        raise _Bad("corrupt_identifiers_pct", f"must be 0 to 100, got {pct:g}")
    tokens = _number(table, "tokens_per_s", defaults.tokens_per_s)
    if tokens <= 0:
        raise _Bad("tokens_per_s", f"must be positive, got {tokens:g}")
    prefill = _number(table, "prefill_tokens_per_s", defaults.prefill_tokens_per_s)
    if prefill <= 0:
        raise _Bad("prefill_tokens_per_s", f"must be positive, got {prefill:g}")
    reasoning_field = table.get("reasoning_field", defaults.reasoning_field)
    if reasoning_field not in REASONING_FIELDS:
        raise _Bad(
            "reasoning_field",
            f"one of {', '.join(REASONING_FIELDS)}, got {_shown(reasoning_field)}",
        )
    leak_mode = table.get("leak_mode", "")
    if leak_mode not in LEAK_MODES:
        modes = ", ".join(mode for mode in LEAK_MODES if mode)
        raise _Bad("leak_mode", f"one of {modes}, got {_shown(leak_mode)}")
    ready = _seconds(table, "ready_after_s") if "ready_after_s" in table else None
    checkpoint = table.get("checkpoint", "")
    if checkpoint not in {kind.value for kind in CheckpointKind}:
        kinds = ", ".join(f'"{kind.value}"' for kind in CheckpointKind if kind.value)
        raise _Bad("checkpoint", f"one of {kinds}, got {_shown(checkpoint)}")
    scale = _number(table, "time_scale", defaults.time_scale)
    if not 0 < scale <= MAX_TIME_SCALE:
        raise _Bad("time_scale", f"must be > 0 and <= {MAX_TIME_SCALE:g}, got {scale:g}")
    return EngineScenario(
        time_scale=scale,
        checkpoint=CheckpointKind(checkpoint),
        ready_after_s=defaults.ready_after_s if ready is None else ready,
        crash_after_s=_seconds(table, "crash_after_s"),
        hang_after_s=_seconds(table, "hang_after_s"),
        ignore_sigint=_flag(table, "ignore_sigint"),
        ignore_signals=_flag(table, "ignore_signals"),
        tokens_per_s=tokens,
        prefill_tokens_per_s=prefill,
        corrupt_identifiers_pct=pct,
        leak_dsml=_flag(table, "leak_dsml"),
        leak_mode=str(leak_mode),
        reasoning_field=str(reasoning_field),
        log_lines=_log_lines(table),
        **_deep_keys(table),
    )


def _tokens(table: Mapping[str, object], key: str) -> int | None:
    if table.get(key) is None:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100_000_000:
        raise _Bad(key, f"expected a whole number of tokens, got {_shown(value)}")
    return value


def _share(table: Mapping[str, object], key: str, default: float) -> float:
    value = _number(table, key, default)
    if not 0.0 <= value <= 1.0:
        raise _Bad(key, f"must be 0 to 1, got {value:g}")
    return value


def _deep_keys(table: Mapping[str, object]) -> dict[str, Any]:
    """The long-context and speculative-decoding keys, checked."""
    defaults = EngineScenario()
    band = table.get("corrupt_band_tokens")
    band_tokens: tuple[int, int] | None = None
    if band is not None:
        if (
            not isinstance(band, list)
            or len(band) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in band)
            or not 0 <= band[0] < band[1]
        ):
            raise _Bad(
                "corrupt_band_tokens", f"expected [FROM, TO] with FROM < TO, got {_shown(band)}"
            )
        band_tokens = (int(band[0]), int(band[1]))
    pct = _number(table, "corrupt_band_pct", defaults.corrupt_band_pct)
    if not 0.0 <= pct <= 100.0:
        raise _Bad("corrupt_band_pct", f"must be 0 to 100, got {pct:g}")
    return {
        "corrupt_band_tokens": band_tokens,
        "corrupt_band_pct": pct,
        "loop_after_tokens": _tokens(table, "loop_after_tokens"),
        "recall_full_until_tokens": _tokens(table, "recall_full_until_tokens"),
        "recall_floor": _share(table, "recall_floor", defaults.recall_floor),
        "recall_floor_at_tokens": _tokens(table, "recall_floor_at_tokens"),
        "drift": _flag(table, "drift"),
        "prefill_pace_max_tokens": _tokens(table, "prefill_pace_max_tokens")
        if "prefill_pace_max_tokens" in table
        else defaults.prefill_pace_max_tokens,
        "speculative": _speculative(table),
        "spec_acceptance": _share(table, "spec_acceptance", defaults.spec_acceptance),
        "spec_collapse_after_s": _seconds(table, "spec_collapse_after_s"),
        "spec_collapsed_acceptance": _share(
            table, "spec_collapsed_acceptance", defaults.spec_collapsed_acceptance
        ),
        "crash_at_depth_tokens": _tokens(table, "crash_at_depth_tokens"),
        "crash_rank": _tokens(table, "crash_rank"),
        "logits_row_chunk": _tokens(table, "logits_row_chunk"),
    }


def _speculative(table: Mapping[str, object]) -> bool:
    value = table.get("speculative", True)
    if not isinstance(value, bool):
        raise _Bad("speculative", f"expected true or false, got {_shown(value)}")
    return value


def _log_lines(table: Mapping[str, object]) -> tuple[tuple[float, str], ...]:
    """``log_lines = [{after_s = 1.0, text = "..."}]``: lines printed after ready."""
    entries = table.get("log_lines", [])
    if not isinstance(entries, list):
        raise _Bad("log_lines", f"expected a list of tables, got {_shown(entries)}")
    lines: list[tuple[float, str]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) - {"after_s", "text"}:
            raise _Bad(f"log_lines[{i}]", "expected a table with after_s and text")
        after_s = _seconds(entry, "after_s") or 0.0
        text = entry.get("text")
        if not isinstance(text, str) or "\n" in text:
            raise _Bad(f"log_lines[{i}].text", "expected one line of text")
        lines.append((after_s, text))
    return tuple(lines)


def parse_engine_scenario(table: Mapping[str, object], label: str) -> EngineScenario:
    """The scenario's raw ``[engine]`` table, checked; ``label`` names the file in errors."""
    try:
        return _build(table)
    except _Bad as exc:
        raise EngineScenarioError(f"scenario {label}: {exc}") from None


def simulated_engine_args(engine: EngineScenario) -> list[str]:
    """The simulated engine's ``--sim-*`` flags for one ``EngineScenario``."""
    args = ["--sim-ready-after-s", str(engine.ready_after_s)]
    args += ["--sim-tokens-per-s", str(engine.tokens_per_s)]
    args += ["--sim-time-scale", f"{engine.time_scale:.6g}"]
    defaults = EngineScenario()
    if engine.prefill_tokens_per_s != defaults.prefill_tokens_per_s:
        args += ["--sim-prefill-tokens-per-s", str(engine.prefill_tokens_per_s)]
    if engine.reasoning_field != defaults.reasoning_field:
        args += ["--sim-reasoning-field", engine.reasoning_field]
    for after_s, text in engine.log_lines:
        args += ["--sim-log-line", f"{after_s:g}={text}"]
    if engine.crash_after_s is not None:
        args += ["--sim-crash-after-s", str(engine.crash_after_s)]
    if engine.hang_after_s is not None:
        args += ["--sim-hang-after-s", str(engine.hang_after_s)]
    if engine.ignore_sigint:
        args.append("--sim-ignore-sigint")
    if engine.ignore_signals:
        args.append("--sim-ignore-signals")
    if engine.corrupt_identifiers_pct:
        args += ["--sim-corrupt-identifiers-pct", str(engine.corrupt_identifiers_pct)]
    if engine.leak_dsml:
        args.append("--sim-leak-dsml")
    if engine.leak_mode:
        args += ["--sim-leak-mode", engine.leak_mode]
    return args + _deep_args(engine)


def _deep_args(engine: EngineScenario) -> list[str]:
    """The ``--sim-*`` flags of the long-context and speculative-decoding keys."""
    defaults = EngineScenario()
    args: list[str] = []
    if engine.corrupt_band_tokens is not None:
        low, high = engine.corrupt_band_tokens
        args += ["--sim-corrupt-band", f"{low}:{high}"]
        args += ["--sim-corrupt-band-pct", f"{engine.corrupt_band_pct:g}"]
    for flag, value in (
        ("--sim-loop-after-tokens", engine.loop_after_tokens),
        ("--sim-recall-full-until-tokens", engine.recall_full_until_tokens),
        ("--sim-recall-floor-at-tokens", engine.recall_floor_at_tokens),
        ("--sim-spec-collapse-after-s", engine.spec_collapse_after_s),
        ("--sim-crash-at-depth-tokens", engine.crash_at_depth_tokens),
        ("--sim-crash-rank", engine.crash_rank),
    ):
        if value is not None:
            args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if engine.recall_full_until_tokens is not None:
        args += ["--sim-recall-floor", f"{engine.recall_floor:g}"]
    if engine.drift:
        args.append("--sim-drift")
    if engine.prefill_pace_max_tokens != defaults.prefill_pace_max_tokens:
        args += ["--sim-prefill-pace-max-tokens", str(engine.prefill_pace_max_tokens)]
    if engine.spec_acceptance != defaults.spec_acceptance:
        args += ["--sim-spec-acceptance", f"{engine.spec_acceptance:g}"]
    if engine.spec_collapse_after_s is not None:
        args += ["--sim-spec-collapsed-acceptance", f"{engine.spec_collapsed_acceptance:g}"]
    return args


_ALWAYS_GIVEN = {
    "--sim-ready-after-s": "ready_after_s",
    "--sim-tokens-per-s": "tokens_per_s",
    "--sim-time-scale": "time_scale",
}


def override_args(table: Mapping[str, object], label: str) -> list[str]:
    """The ``--sim-*`` flags of only the keys ``table`` gives (a rebuild's new behaviour).

    Checked like a scenario's ``[engine]``; the flags every engine gets (ready time,
    decode rate, time scale) are left out unless ``table`` names them, so a rebuild that changes one
    thing keeps the scenario's pace.
    """
    for fixed in _NOT_IN_A_BUILD:
        if fixed in table:
            raise EngineScenarioError(
                f"{label}: engine.{fixed}: the checkpoint is on the rig's disk, not in the image: "
                "a scenario's [engine] key only"
            )
    args = simulated_engine_args(parse_engine_scenario(table, label))
    kept: list[str] = []
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        key = _ALWAYS_GIVEN.get(arg)
        if key is not None and key not in table and index + 1 < len(args):
            skip = True
            continue
        kept.append(arg)
    # A key given at its "off" value (0, false: a fixed build) has no flag of its own, so
    # the scenario's flag would still win: the engine is told to put it back to its default.
    for key in table:
        dest = _DESTS.get(key, f"sim_{key}")
        if f"--{dest.replace('_', '-')}" not in kept:
            kept += [UNSET_FLAG, dest]
    return kept


UNSET_FLAG = "--sim-unset"
# Scenario keys a rebuilt image cannot change: the simulated rig's disk, not the engine.
_NOT_IN_A_BUILD = ("checkpoint",)
# Scenario keys whose engine flag is not ``--sim-<key>``.
_DESTS = {"corrupt_band_tokens": "sim_corrupt_band", "log_lines": "sim_log_line"}
