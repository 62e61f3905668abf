"""The ``[recovery]`` section of fleet.toml, declared once, here, with the policy's view of it.

The daemon's ``Settings`` composes ``RecoverySettings`` as it is (same names as the config
file, one validator); the policy reads ``PolicySettings``, built by ``policy_settings``.
Backoff is ``min(backoff_base_s * 2**(n-1), backoff_max_s)`` for the n-th failure in a row
(a ``backoff_max_s`` below the base means no growth); n goes back to 0 once a run was
ready for ``backoff_reset_after_s``. ``breaker_max_restarts`` automatic restarts within
``breaker_window_s`` hold the engine until a person acts. ``gate_checks`` are the check ids
whose critical result refuses a start (the latch always does); ``escalate_within_boots``
is how many boots back a card's earlier hardware fault turns a warm reboot's advice into a
cold power cycle (0: never). ``probe_min_interval_s`` is how often at most an automatic
CUDA probe (after a suspicious Xid with the engine stopped) probes a card (``probe_limit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hwcheck.checks import CHECKS

# Unsafe to start on: no driver, a missing, lost or locked card, a hardware Xid, a wedged
# card, a critical temperature, the host facts judged against the rig's baseline (the
# host checks) and a card whose memory test found flipped bits (no ECC: it would serve
# wrong answers silently): each check's ``SPEC.gate``. Speed and hygiene problems (the
# power brake, a cap off target, foreign processes, the engine's own output, vbios,
# clocks, pcie_errors) warn instead.
DEFAULT_GATE_CHECKS: tuple[str, ...] = tuple(spec.id for spec in CHECKS if spec.gate)


def _argv(value: list[str] | None) -> list[str] | None:
    if value is not None and (not value or not all(part.strip() for part in value)):
        raise ValueError('expected an argv list of non-empty strings, e.g. ["ipmitool", ...]')
    if value is not None and any("\0" in part for part in value):
        # exec cannot pass a NUL: it raised at run time, when the reboot was due (issue 36)
        raise ValueError("an argument holds a NUL character, which no command can be given")
    return value


class RecoverySettings(BaseModel):
    """``[recovery]``: dry run, restart backoff, the breaker, the start gate, host commands."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dry_run: bool = False
    backoff_base_s: Annotated[float, Field(gt=0)] = 10.0
    backoff_max_s: Annotated[float, Field(gt=0)] = 300.0
    backoff_reset_after_s: Annotated[float, Field(gt=0)] = 600.0
    breaker_max_restarts: Annotated[int, Field(ge=1)] = 5
    breaker_window_s: Annotated[float, Field(gt=0)] = 1800.0
    reboot_command: list[str] = Field(default_factory=lambda: ["systemctl", "reboot"])
    power_cycle_command: list[str] | None = None
    gate_checks: tuple[Annotated[str, Field(min_length=1)], ...] = DEFAULT_GATE_CHECKS
    escalate_within_boots: Annotated[int, Field(ge=0, le=100)] = 1
    probe_min_interval_s: Annotated[float, Field(ge=0)] = 60.0
    # A drain's grace (``fleetctl drain`` without --grace-s, and a confirmed reboot's drain).
    drain_grace_s: Annotated[float, Field(ge=0, le=86400)] = 120.0

    @field_validator("reboot_command", "power_cycle_command")
    @classmethod
    def _commands_are_argv(cls, value: list[str] | None) -> list[str] | None:
        return _argv(value)


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """The knobs the pure policy reads (``policy_settings`` builds them from the config)."""

    autostart: bool = True
    restart_on_failure: bool = True
    backoff_base_s: float = 10.0
    backoff_max_s: float = 300.0
    backoff_reset_after_s: float = 600.0
    breaker_max_restarts: int = 5
    breaker_window_s: float = 30 * 60.0
    gate_checks: frozenset[str] = field(default_factory=lambda: frozenset(DEFAULT_GATE_CHECKS))
    escalate_within_boots: int = 1


def policy_settings(
    recovery: RecoverySettings, *, autostart: bool = True, restart_on_failure: bool = True
) -> PolicySettings:
    """The policy's knobs from ``[recovery]`` (and ``[serving] autostart``)."""
    return PolicySettings(
        autostart=autostart,
        restart_on_failure=restart_on_failure,
        backoff_base_s=recovery.backoff_base_s,
        backoff_max_s=recovery.backoff_max_s,
        backoff_reset_after_s=recovery.backoff_reset_after_s,
        breaker_max_restarts=recovery.breaker_max_restarts,
        breaker_window_s=recovery.breaker_window_s,
        gate_checks=frozenset(recovery.gate_checks),
        escalate_within_boots=recovery.escalate_within_boots,
    )
