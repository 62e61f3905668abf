"""The ``[serving]`` section of fleet.toml, declared once, here (``[recovery]`` is recovery's).

The daemon's ``Settings`` composes it as it is (same names as the config file, one
validator), and the supervisor reads it directly. ``SupervisorTuning`` holds
the few knobs that are not in the config file (probe timeout, log rotation, ...): their
defaults suit a real rig; tests and the bench make them short.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from serving.canary.settings import compiled_regex
from serving.profiles import DEFAULT_PROFILE, PROFILE_NAME_RE
from serving.recipe.checkpoint import VerifyMode
from serving.runtime.provenance import DEFAULT_LABELS


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LogSignatureRule(_Section):
    """One ``[[serving.log_signatures]]``: a line pattern of the engine log worth counting.

    Added to the built-in set (out-of-vocab tokens, tripwires, grammar rejections, tool-call
    salvage, tracebacks); ``severity`` ``warning`` or ``critical`` also records an event the
    first time in an hour it is seen (the line itself is never copied: it can hold prompts).
    """

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=48)]
    pattern: Annotated[str, Field(min_length=1)]
    severity: Literal["info", "warning", "critical"] = "warning"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return compiled_regex(value)


class ServingSettings(_Section):
    """``[serving]``: the engine's recipe and how it is supervised.

    Cold starts take 20 to 45 minutes, hence the long ``startup_timeout_s``. A stop sends
    SIGINT, waits ``stop_timeout_s``, sends SIGTERM and waits as long again; SIGKILL only
    with ``allow_kill``. ``probe_failures`` health probes failing in a row make the engine
    unhealthy (then restarted).

    ``recipe`` is the profile ``default``; ``profiles`` are the others (recipe keys, or
    ``recipe = "path"``); ``profile`` the one autostarted (``default`` when ``recipe`` is
    set, else the first profile). ``stop_foreign_timeout_s`` is the grace that
    ``--stop-foreign`` gives a foreign container after each signal (SIGINT, then SIGTERM).
    ``provenance_labels`` and ``provenance_command`` say what build ran (``fleetctl
    builds``); ``acceptance_alert_share`` and ``ttft_alert_factor`` are when the engine's
    own metrics alert (acceptance below that share of its 24 h median, TTFT p95 that
    many times its median), once ``metrics_baseline_min_samples`` samples make a median.
    """

    recipe: str | dict[str, Any] | None = None
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    profile: str | None = None
    # The profiles to keep running (``serving.engines``): one name today, the profile in force.
    run: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = Field(
        default=None, min_length=1, max_length=16
    )
    log_signatures: list[LogSignatureRule] = Field(default_factory=list)
    stop_foreign_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    autostart: bool = True
    startup_timeout_s: Annotated[float, Field(gt=0)] = 2700.0
    probe_interval_s: Annotated[float, Field(gt=0, le=600)] = 5.0
    probe_failures: Annotated[int, Field(ge=1, le=100)] = 3
    metrics_interval_s: Annotated[float, Field(gt=0, le=3600)] = 15.0
    stop_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    stop_on_exit: bool = False
    allow_kill: bool = False
    # What build ran (``serving.runtime.provenance``): image labels to record, and for a
    # bare process a command whose output names the build (an argv list, run with a timeout).
    provenance_labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS))
    provenance_command: list[str] | None = None
    provenance_timeout_s: Annotated[float, Field(gt=0, le=600)] = 15.0
    # The engine's own metrics (``serving.runtime.engine_metrics``): the window of the
    # quantiles and rates, and when they alert against their 24 h median.
    metrics_window_s: Annotated[float, Field(gt=0, le=86400)] = 300.0
    acceptance_alert_share: Annotated[float, Field(ge=0, le=1)] = 0.6
    ttft_alert_factor: Annotated[float, Field(ge=1, le=1000)] = 3.0
    metrics_baseline_min_samples: Annotated[int, Field(ge=1, le=100_000)] = 20
    # The checkpoint checked before every start (``serving.recipe.checkpoint``): shards,
    # sizes and headers (quick), plus hashes against ``fleetctl recipe manifest`` (full).
    verify_checkpoint: VerifyMode = VerifyMode.QUICK

    @field_validator("provenance_command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not all(part for part in value)):
            raise ValueError('an argv list of non-empty strings, e.g. ["git", "describe"]')
        return value

    @field_validator("profiles")
    @classmethod
    def _profile_tables(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, table in value.items():
            if not PROFILE_NAME_RE.match(name):
                raise ValueError(f"profile name {name!r}: letters, digits, '.', '_', '-'")
            if "recipe" in table and len(table) > 1:
                extra = ", ".join(sorted(key for key in table if key != "recipe"))
                raise ValueError(
                    f'profile {name!r}: give recipe = "path" or recipe keys, not both ({extra})'
                )
            if "recipe" in table and not isinstance(table["recipe"], str):
                raise ValueError(f"profile {name!r}: recipe should be a path (a string)")
        return value

    @field_validator("run")
    @classmethod
    def _run_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            twice = sorted({name for name in value if value.count(name) > 1})
            if twice:
                raise ValueError(f"names {', '.join(twice)} twice")
        return value

    @model_validator(mode="after")
    def _known_profile(self) -> ServingSettings:
        if self.run is not None and self.profile is not None and self.run != [self.profile]:
            raise ValueError(
                f"[serving] profile {self.profile!r} and run {self.run!r} disagree: give one"
            )
        if self.recipe is not None and DEFAULT_PROFILE in self.profiles:
            raise ValueError(
                f"[serving] recipe is the profile {DEFAULT_PROFILE!r}: "
                f"[serving.profiles.{DEFAULT_PROFILE}] would be a second one"
            )
        named = self.profile
        if named is not None and named != DEFAULT_PROFILE and named not in self.profiles:
            known = ([DEFAULT_PROFILE] if self.recipe is not None else []) + list(self.profiles)
            raise ValueError(
                f"profile {named!r} names no profile (known: {', '.join(known) or 'none'})"
            )
        return self

    def active_default(self) -> str:
        """The profile autostarted: ``run``'s, ``profile``, else ``default``, else the first."""
        if self.run:
            return self.run[0]
        if self.profile is not None:
            return self.profile
        if self.recipe is None and self.profiles:
            return next(iter(self.profiles))
        return DEFAULT_PROFILE


class SupervisorTuning(_Section):
    """The supervisor's knobs that the config file does not offer.

    ``term_timeout_s`` is the wait after SIGTERM (``None``: as long as ``stop_timeout_s``);
    ``kill_wait_s`` the wait after SIGKILL (``allow_kill``). Whether a crashed engine is
    restarted is the recovery policy's decision: the supervisor reports the exit.
    """

    probe_timeout_s: Annotated[float, Field(gt=0)] = 2.0
    term_timeout_s: Annotated[float, Field(gt=0)] | None = None
    kill_wait_s: Annotated[float, Field(gt=0)] = 10.0
    classify_tail_lines: Annotated[int, Field(gt=0)] = 200
    log_max_bytes: Annotated[int, Field(gt=0)] = 64 * 1024 * 1024
    log_backups: Annotated[int, Field(ge=0)] = 3
    log_tail_lines: Annotated[int, Field(gt=0)] = 2000
    log_poll_interval_s: Annotated[float, Field(gt=0)] = 0.25
