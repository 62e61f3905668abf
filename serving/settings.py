"""The ``[serving]`` section of fleet.toml, declared once, here (``[recovery]`` is recovery's).

The daemon's ``Settings`` composes it as it is (same names as the config file, one
validator), and the supervisor reads it directly. ``SupervisorTuning`` holds
the few knobs that are not in the config file (probe timeout, log rotation, ...): their
defaults suit a real rig; tests and the bench make them short.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServingSettings(_Section):
    """``[serving]``: the engine's recipe and how it is supervised.

    Cold starts take 20 to 45 minutes, hence the long ``startup_timeout_s``. A stop sends
    SIGINT, waits ``stop_timeout_s``, sends SIGTERM and waits as long again; SIGKILL only
    with ``allow_kill``. ``probe_failures`` health probes failing in a row make the engine
    unhealthy (then restarted).
    """

    recipe: str | dict[str, Any] | None = None
    autostart: bool = True
    startup_timeout_s: Annotated[float, Field(gt=0)] = 2700.0
    probe_interval_s: Annotated[float, Field(gt=0, le=600)] = 5.0
    probe_failures: Annotated[int, Field(ge=1, le=100)] = 3
    metrics_interval_s: Annotated[float, Field(gt=0, le=3600)] = 15.0
    stop_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    stop_on_exit: bool = False
    allow_kill: bool = False


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
