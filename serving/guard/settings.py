"""The ``[guard]`` section of fleet.toml: the traffic guard in front of the engine.

Off unless ``listen`` is set. Then the engine listens on an internal loopback port chosen
by fleetd and agents call the guard on ``listen`` instead. Pins (``[guard.pin]``) are
request fields set on every request the client sent without them (``override = true``:
always); a profile can have its own (``[guard.profiles.NAME]``, e.g. a GLM profile's
template keys). Keys (``[[guard.keys]]``) are stored as salted SHA-256 hashes made by
``fleetctl guard key NAME``, never as the key itself.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from serving.guard.repair.config import RepairSettings
from serving.profiles import PROFILE_NAME_RE

# How fleetd hands the guard process its settings and its control token (the environment:
# never argv, which other users can read). Here, not in ``main``: fleetd's keeper reads them
# without importing the guard's web stack (aiohttp, uvicorn) into every fleetd.
SETTINGS_ENV = "CMPFLEET_GUARDPROC_SETTINGS"
TOKEN_ENV = "CMPFLEET_GUARDPROC_TOKEN"  # noqa: S105 (the variable's name)

# Request fields a pin may not set: they are the conversation, not a setting.
UNPINNABLE = frozenset({"messages", "prompt", "stream"})
KEY_HASH_RE = r"^sha256:[0-9a-f]{32}:[0-9a-f]{64}$"
# Past the seeds' 120-140k tokens the "Let me..." loops start; 115k is the owners' cap.
DEPTH_EVENT_DEFAULT_TOKENS = 100_000
MirrorMode = Literal["", "reasoning_content", "reasoning", "both"]
# The routes forwarded to the engine by default: OpenAI's and vLLM's tokenizer's. The rest
# of an engine's routes (vLLM's admin ones, the simulator's /sim/*, /metrics) are not for
# agents: one key's client must not read what another's sent (issue 36).
DEFAULT_ROUTES = (
    "/v1/models",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/tokenize",
    "/detokenize",
    "/health",
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _pinnable(fields: dict[str, Any]) -> dict[str, Any]:
    bad = sorted(UNPINNABLE & set(fields))
    if bad:
        raise ValueError(f"{bad[0]!r} cannot be pinned (it is the conversation, not a setting)")
    return fields


class GuardKey(_Section):
    """One client key (``[[guard.keys]]``): a name for the accounts and the key's hash."""

    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
    sha256: str
    # Fair queues: at most this many requests of the key at the engine (None: no limit);
    # a higher priority is served first when requests wait.
    max_parallel: Annotated[int, Field(ge=1, le=4096)] | None = None
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 0

    @field_validator("sha256")
    @classmethod
    def _hash(cls, value: str) -> str:
        if not re.match(KEY_HASH_RE, value):
            raise ValueError(
                "expected the hash `fleetctl guard key NAME` prints (sha256:<salt>:<digest>), "
                "never the key itself"
            )
        return value


class GuardProfile(_Section):
    """``[guard.profiles.NAME]``: the pins of one launch profile (replacing ``[guard.pin]``)."""

    pin: dict[str, Any] = Field(default_factory=dict)
    override: bool | None = None  # None: ``[guard] override``

    @field_validator("pin")
    @classmethod
    def _pin_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _pinnable(value)


class GuardSettings(_Section):
    """``[guard]``: where the guard listens and what it does to traffic."""

    listen: str | None = None
    max_context_tokens: Annotated[int, Field(ge=1)] | None = None
    cap_mode: Literal["refuse", "warn"] = "refuse"
    mirror_reasoning: MirrorMode = ""
    pin: dict[str, Any] = Field(default_factory=dict)
    override: bool = False
    profiles: dict[str, GuardProfile] = Field(default_factory=dict)
    keys: list[GuardKey] = Field(default_factory=list)
    # A client that names its conversation: else a session is its first messages' hash.
    session_header: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]+$")] = "x-session-id"
    # A session crossing these records an event (once each): its depth in prompt tokens
    # (default: 85% of the cap, else 100k), its leaks and its loops (replies showing one).
    event_depth_tokens: Annotated[int, Field(ge=1)] | None = None
    event_leaks: Annotated[int, Field(ge=1)] = 3
    event_loops: Annotated[int, Field(ge=1)] = 3
    loop_repeats: Annotated[int, Field(ge=2, le=100)] = 3
    retry_after_s: Annotated[int, Field(ge=1, le=3600)] = 10
    max_body_mib: Annotated[float, Field(gt=0, le=1024)] = 64.0
    # The only paths forwarded (exact; "PREFIX/*" also forwards what is under PREFIX/).
    routes: list[Annotated[str, Field(pattern=r"^/[A-Za-z0-9_./*-]*$")]] = Field(
        default_factory=lambda: list(DEFAULT_ROUTES)
    )
    # The listener's bounds: a request head arrives within header_timeout_s, an idle
    # kept-alive connection ends after idle_timeout_s, uvicorn answers 503 beyond
    # max_connections.
    header_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    idle_timeout_s: Annotated[int, Field(ge=1, le=3600)] = 60
    max_connections: Annotated[int, Field(ge=1, le=65536)] = 2048
    # How long a request may wait in the fair queue before its 429: an agent's stream holds
    # its slot for minutes, so the wait is long enough to outlast one.
    queue_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    repair: RepairSettings = Field(default_factory=RepairSettings)

    @field_validator("pin")
    @classmethod
    def _pin_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _pinnable(value)

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None:
            return value
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdecimal() or not 0 <= int(port) < 65536:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        return value

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, value: dict[str, GuardProfile]) -> dict[str, GuardProfile]:
        for name in value:
            if not PROFILE_NAME_RE.match(name):
                raise ValueError(f"profile name {name!r}: letters, digits, '-' and '_'")
        return value

    @model_validator(mode="after")
    def _unique_keys(self) -> GuardSettings:
        names = [key.name for key in self.keys]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"key name {twice[0]!r} is used twice")
        return self

    def forwards(self, path: str) -> bool:
        """True when ``path`` is on the allow-list of ``routes``."""
        for route in self.routes:
            if route.endswith("/*"):
                if path.startswith(route[:-1]):
                    return True
            elif path == route:
                return True
        return False

    @property
    def enabled(self) -> bool:
        """True when the guard runs (``listen`` is set)."""
        return self.listen is not None

    def depth_event_tokens(self) -> int:
        """The session depth that records an event."""
        if self.event_depth_tokens is not None:
            return self.event_depth_tokens
        if self.max_context_tokens is not None:
            return max(1, self.max_context_tokens * 85 // 100)
        return DEPTH_EVENT_DEFAULT_TOKENS

    def pins_for(self, profile: str | None) -> tuple[dict[str, Any], bool]:
        """The pins and the override flag in force for ``profile``."""
        own = self.profiles.get(profile or "")
        if own is None:
            return dict(self.pin), self.override
        return dict(own.pin), self.override if own.override is None else own.override
