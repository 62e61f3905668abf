"""Response bodies of the API, as pydantic models: what ``/openapi.json`` documents.

Every ``/api/v1`` route declares one of these, so clients can be generated from the
schema. The documents are built by the daemon's services as plain dicts; the models
check them on the way out and never drop data: every model allows extra keys (the
status document grows with each capability, and a field added below must reach the
wire even before it is declared here), numbers keep their JSON type (``Number``), and
times stay the exact strings the daemon wrote (``IsoTime``).

Field names and meanings are docs/reference.md's ("JSON documents", "HTTP API").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from hwcheck.model import Advice, EventKind, Severity
from serving.runtime.classify import CrashClass
from serving.runtime.states import ServingState
from web.models_drain import DrainDocument
from web.models_host import AerDocument, HostDocument

# An int stays an int and a float a float (a plain ``float`` would turn 180 into 180.0).
Number = int | float
IsoTime = Annotated[
    str, Field(description="ISO 8601 with a UTC offset", json_schema_extra={"format": "date-time"})
]
Overall = Literal["ok", "warning", "critical", "unknown"]


class Document(BaseModel):
    """Base of every response body: extra keys pass through untouched."""

    model_config = ConfigDict(extra="allow")


class HealthDocument(Document):
    """``GET /healthz``."""

    status: Literal["ok"]
    version: str | None = Field(None, description="cmpfleet's version (fleetd --version)")


class RefusalDocument(Document):
    """A reason not to start the engine, or a warning shown with a start."""

    code: str
    message: str
    blocking: bool


class ErrorDocument(Document):
    """A refusal (4xx/5xx from a domain error): the reason and a stable code."""

    detail: str = Field(description="one line a person reads")
    code: str = Field(description="stable machine word, e.g. reboot_latch, not_found")
    reasons: list[RefusalDocument] | None = Field(
        default=None, description="every reason with its own code (a refused start)"
    )


class GpuProcessDocument(Document):
    """A compute process on a card: pid, name and container from ``/proc``, its memory."""

    pid: int
    name: str | None
    container: str | None = Field(description="docker 3f2a1b0c9d8e; null: not in a container")
    used_memory_mib: int | None


class CauseDocument(Document):
    """One fault as a person reads it: failing checks grouped by cause, naming the cards."""

    id: str = Field(description="the check")
    severity: Severity
    cards: list[int] = Field(description="the cards it is on; empty: rig-wide")
    where: str = Field(description="cards 0-3, card 1, or empty")
    message: str
    remedy: str
    confirmed: bool = True
    explained_by: str | None = Field(
        None, description="the critical check that explains it (fix that one first)"
    )
    headline: str = Field(description="power_brake cards 0-3: message, the one line")


class CardDocument(Document):
    """One card of the status document (the documented card keys, then extras)."""

    index: int
    pci_bus_id: str
    uuid: str
    name: str
    serial: str | None = None
    memory_total_mib: int | None
    memory_used_mib: int | None = None
    power_limit_w: Number | None
    power_draw_w: Number | None
    power_brake_active: bool | None
    clock_event_reasons: list[str] | None = None
    sm_clock_mhz: int | None = None
    temperature_c: Number | None
    memory_temperature_c: Number | None = Field(None, description="HBM temperature")
    pcie_gen: int | None
    pcie_width: int | None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_baseline_gen: int | None = Field(None, description="the generation it should train")
    pcie_baseline_width: int | None = Field(None, description="the width it should train")
    persistence_mode: bool | None = None
    xid_since_boot: int
    state: str = Field(description="ok, warning, critical or lost")
    lost_reason: str | None = None
    # Host truth (docs/reference.md "What cmpfleet checks on the host").
    vbios_version: str | None = None
    bar1_total_mib: int | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    pcie_replay_count: int | None = Field(None, description="PCIe replays since boot")
    driver: str | None = Field(None, description="the driver bound to the card")
    bridges: list[str] | None = Field(None, description="the bridges above it, parent first")
    uplink_gen: int | None = None
    uplink_width: int | None = None
    aer: AerDocument | None = None
    lost_kind: str | None = Field(
        default=None, description="gpu_is_lost, reset_required, not_answering or unknown"
    )
    tags: list[str] | None = Field(
        None, description="its failing checks in short, worst first: BRAKE, BAR1, LOCKED, Xid 31"
    )
    power_cap_w: Number | None = Field(
        None, description="the cap it should run at ([rig] power_cap_w, or its own by_card)"
    )
    in_profile: bool | None = Field(
        None, description="the profile in force uses this card (null: no engine configured)"
    )
    # What nvitop shows (docs/reference.md "JSON documents").
    utilization_gpu_pct: int | None = Field(None, description="SMs busy, % of the last sample")
    utilization_memory_pct: int | None = Field(None, description="memory controller busy, %")
    memory_used_pct: Number | None = Field(None, description="memory_used_mib of the total, %")
    pcie_tx_kib_s: int | None = Field(None, description="PCIe sent, KiB/s")
    pcie_rx_kib_s: int | None = Field(None, description="PCIe received, KiB/s")
    remapped_rows_correctable: int | None = Field(
        None, description="rows remapped after correctable errors (null: not reported)"
    )
    remapped_rows_uncorrectable: int | None = Field(
        None, description="rows remapped after uncorrectable errors (null: not reported)"
    )
    row_remap_pending: bool | None = Field(None, description="a remap waits for the next reset")
    row_remap_failed: bool | None = Field(None, description="a remap failed: no spare row left")
    processes: list[GpuProcessDocument] | None = Field(
        None, description="its compute processes (null: the driver does not list them)"
    )


class CheckDocument(Document):
    """One check result: ``{id, card, severity, message, remedy}``."""

    id: str
    card: int | None
    severity: Severity
    message: str
    remedy: str


class EngineMetricsDocument(Document):
    """The engine's load from its ``/metrics``; ``null`` means not known yet."""

    generation_tokens_per_s: Number | None
    requests_running: Number | None
    requests_waiting: Number | None
    kv_cache_usage_pct: Number | None
    ts: IsoTime


class DriftDocument(Document):
    """An engine that runs but was not adopted: another recipe than the active profile's."""

    pid: int
    container_name: str | None
    recipe_hash: str = Field(description="what it runs (empty: a container with no label)")
    expected_hash: str = Field(description="the active profile's recipe hash")
    url: str
    mode: str


class SwitchProgressDocument(Document):
    """A profile switch (``fleetctl serve``): in progress, or the last one."""

    id: str
    previous: str = Field(description="the profile in force before the switch")
    profile: str = Field(description="the profile switched to")
    image: str | None = Field(None, description="the image pinned (a rollback's digest)")
    previous_image: str | None = Field(None, description="the image pinned before the switch")
    phase: Literal["stopping", "starting", "done", "refused", "failed"]
    message: str | None
    refusals: list[RefusalDocument]
    started_at: IsoTime
    ended_at: IsoTime | None


class LastRefusalDocument(Document):
    """The last start refused (autostart, the bring-up, a person's): kept until a start."""

    ts: IsoTime
    trigger: str = Field(description="what asked: autostart, start_request, bring_up, ...")
    codes: list[str] = Field(description="each reason's stable code: reboot_latch, ...")
    message: str


class ServingDocument(Document):
    """The ``serving`` block: ``{state, pid, restarts, since, url}`` and extras."""

    state: ServingState
    pid: int | None
    restarts: int = Field(description="running total; backoff resets never zero it")
    since: IsoTime | None
    url: str | None
    reason: str | None = None
    # Engine output (it can hold a user's prompt): only in the token holder's view.
    last_log_line: Annotated[
        str | None, Field(description="the engine's newest log line; only with the token")
    ] = None
    crash_class: CrashClass | None = None
    metrics: EngineMetricsDocument | None = None
    adopted: bool | None = None
    backoff_remaining_s: Number | None = None
    last_refusal: list[RefusalDocument] | None = None
    profile: str | None = Field(None, description="the launch profile in force")
    pinned_image: str | None = Field(
        None, description="the image a rollback pinned the profile to (by digest)"
    )
    cards: list[int] | None = Field(None, description="the cards the profile in force uses")
    refusal: LastRefusalDocument | None = Field(
        None, description="the last start refused, kept until the next start"
    )
    start_blocked: list[RefusalDocument] | None = Field(
        None, description="what the start gate would refuse a start for now (empty: it may start)"
    )
    drift: DriftDocument | None = None
    switch: SwitchProgressDocument | None = None
    guard: dict[str, Any] | None = Field(
        default=None,
        description="the traffic guard in front of the engine ([guard]): listen, up, "
        "sessions, refused (over the cap), leaks_last_hour, loops_last_hour",
    )


class RecoveryDecisionDocument(Document):
    """One recovery decision or action from the audit trail (newest first)."""

    ts: IsoTime
    actor: str = Field(description="recovery, fleetd, or the person (api, cli)")
    action: str = Field(
        description="stop_and_latch, restart_after, hold, start, stop, refuse, "
        "advise_inspection, probe, reboot, power_cycle, clear_latch or bring_up"
    )
    reason: str | None
    outcome: str
    dry_run: bool


class BringUpDocument(Document):
    """What the last post-reboot bring-up did (caps, checks, probe, engine)."""

    ts: IsoTime
    boot_id: str
    engine_started: bool
    summary: str = Field(description="each step, and exactly why the engine did not start")
    refusals: list[RefusalDocument] | None = Field(
        default=None, description="why the engine was not started: every reason with its code"
    )


class RefusedStartDocument(Document):
    """The last start recovery refused, until one is made: every reason with its code."""

    ts: IsoTime
    trigger: str = Field(description="start_request, autostart, bring_up or backoff_due")
    actor: str
    reasons: list[RefusalDocument]


class RecoveryDocument(Document):
    """The ``recovery`` block: the reboot-required latch, plus the last decisions."""

    reboot_required: bool
    reason: str | None
    since: IsoTime | None
    advice: str | None = Field(description="the exact next step for a person")
    advice_kind: Advice | None = Field(
        default=None,
        description="warm_reboot, cold_power_cycle or take_card_out: which step the advice is",
    )
    way_out: str | None = Field(
        default=None, description="every way out: the reboot (or power cycle), or a recorded clear"
    )
    dry_run: bool | None = None
    power_cycle: bool | None = Field(
        default=None,
        description="reboot --cold can power-cycle here ([recovery] power_cycle_command, or "
        "the simulated rig); false: it only explains the manual power cycle",
    )
    decisions: list[RecoveryDecisionDocument] | None = None
    bring_up: BringUpDocument | None = None
    last_refused_start: RefusedStartDocument | None = None
    evidence: dict[str, Any] | None = Field(
        default=None,
        description="the crash black box: bundles kept, the last, the boot fingerprint, and "
        "degraded (why evidence could not be written; recovery goes on without it)",
    )


class RebootRequest(BaseModel):
    """``POST /api/v1/recovery/reboot`` body: without ``confirm`` it only explains.

    ``cold``: a power cycle (``[recovery] power_cycle_command``) instead of a reboot.
    ``force``: reboot even when the default boot entry is not the baseline kernel, or
    warm while the latch asks for a cold power cycle (or the card out).
    """

    model_config = ConfigDict(extra="forbid")
    # Only the JSON ``true`` confirms (``"yes"``, ``1`` or ``"on"`` answer 422): a reboot.
    confirm: StrictBool = False
    cold: StrictBool = False
    force: StrictBool = False


class ClearLatchRequest(BaseModel):
    """``POST /api/v1/recovery/clear`` body: why a person clears the latch (recorded)."""

    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str, Field(min_length=1, max_length=1000)]


class RebootDocument(Document):
    """``POST /api/v1/recovery/reboot``: what would happen, or what was done."""

    confirmed: bool
    done: bool
    message: str
    advised: str | None = Field(
        default=None,
        description="the fleetctl reboot flags the latch in force asks for (none: no latch)",
    )


class ClearLatchDocument(Document):
    """``POST /api/v1/recovery/clear``: whether a latch was cleared."""

    cleared: bool
    message: str


class RigInfoDocument(Document):
    """The ``rig`` block: where the picture comes from and how fresh it is."""

    simulated: bool
    boot_id: str | None
    polls: int
    last_poll: IsoTime | None
    last_poll_error: str | None
    nvml_error: str | None = Field(None, description="why NVML cannot be read, while it cannot")
    last_poll_age_s: Number | None = Field(None, description="seconds since the last poll")
    stale: bool | None = Field(None, description="the last poll is too old to judge the rig")
    stale_reason: str | None = None
    xid_since_boot: int
    kernel_records_lost: int
    why: str | None = Field(default=None, description="the one line behind the verdict")
    name: str | None = Field(None, description="[rig] name, else the host name")
    power_cap_w: Number | None = Field(None, description="[rig] power_cap_w: every card's target")
    temperature_warn_c: Number | None = Field(None, description="[rig] temperature_warn_c")
    temperature_crit_c: Number | None = Field(None, description="[rig] temperature_crit_c")


class DaemonInfoDocument(Document):
    """The ``daemon`` block: the fleetd process answering."""

    pid: int
    started_at: IsoTime
    version: str | None = Field(None, description="cmpfleet's version (fleetd --version)")
    gpu_pids: list[int] | None = Field(
        None, description="fleetd and the engine's process tree: never foreign GPU processes"
    )


class CanaryResultDocument(Document):
    """One canary's result: ``{name, result, figure, advice, ts}`` and extras."""

    name: str = Field(
        description="copy_fidelity, tool_calls, reasoning_field, throughput; once the deep "
        "round has run also copy_depth, recall, loop, determinism (details.depths per depth)"
    )
    result: Literal["pass", "warn", "fail", "skipped", "stale"] = Field(
        description="stale: from before the engine's current run, or the engine is not ready"
    )
    figure: Number | None = Field(description="the measure, in unit (ratio, calls, chars, tok/s)")
    advice: str | None = Field(description="one line: what to do; empty or null when nothing")
    ts: IsoTime | None = Field(description="when it ran; null when it has not run yet")
    unit: str | None = None
    message: str | None = None
    duration_s: Number | None = None
    details: dict[str, object] | None = None
    last_skipped_ts: IsoTime | None = None
    last_skipped_reason: str | None = None
    last_result: str | None = Field(None, description="a stale entry's old result")
    build_id: int | None = Field(
        None, description="the engine build it judged (GET /api/v1/builds)"
    )


class LogSignatureDocument(Document):
    """How often one non-fatal engine log signature was seen."""

    name: str
    this_hour: int
    last_24h: int
    last_seen_hour: IsoTime | None


class ExplanationDocument(Document):
    """The long text behind a fault's headline, held once (``fleetctl explain`` prints it)."""

    fault: str = Field(description="the fault kind, as `fleetctl explain` takes it: `xid 31`")
    title: str = Field(description="its short name, as headlines say it")
    text: str


class EngineDocument(ServingDocument):
    """One engine of the status's ``engines``: its ``serving`` block and its own canaries."""

    canaries: list[CanaryResultDocument] | None = Field(
        None,
        description="this engine's canaries, shaped as the top-level ``canaries`` (which "
        "stays the primary engine's)",
    )


class StatusDocument(Document):
    """``GET /api/v1/status``: the same document as ``fleetctl status --json``."""

    overall: Overall
    cards: list[CardDocument]
    checks: list[CheckDocument]
    causes: list[CauseDocument] | None = Field(
        None, description="the failing checks grouped by cause, worst and root causes first"
    )
    serving: ServingDocument
    engines: list[EngineDocument] | None = Field(
        None,
        description="every engine fleetd runs, one block each (``profile``, ``cards``, "
        "``canaries``); the first is ``serving``",
    )
    recovery: RecoveryDocument
    rig: RigInfoDocument | None = None
    daemon: DaemonInfoDocument | None = None
    canaries: list[CanaryResultDocument] | None = None
    log_signatures: list[LogSignatureDocument] | None = None
    explanations: list[ExplanationDocument] | None = Field(
        None,
        description="each fault of this boot's long explanation, once: checks, the latch, "
        "events and alerts carry only headlines",
    )
    host: HostDocument | None = None
    drain: DrainDocument | None = Field(
        None, description="the rig's drain: its guard answers 503 while ``draining``"
    )


class EventDocument(Document):
    """One event: ``{id, ts, kind, card, xid, severity, message}`` and extras."""

    id: int
    ts: IsoTime
    kind: EventKind
    card: int | None
    xid: int | None
    severity: Severity = Field(description="events carry info for news that is no verdict")
    message: str
    pci_bus_id: str | None = None
    ts_kernel: IsoTime | None = None  # an Xid's time in the kernel log (``ts``: when stored)
    acked: bool | None = None
    acked_at: IsoTime | None = None
    acked_by: str | None = None


class AckDocument(Document):
    """``POST /api/v1/events/{id}/ack``."""

    id: int
    acked: bool


class CapResultDocument(Document):
    """What happened to one card's power limit."""

    card: int
    before_w: Number | None
    target_w: Number
    outcome: str = Field(description="applied, already, skipped, failed or dry_run")
    detail: str


class CapsDocument(Document):
    """``POST /api/v1/caps/apply``."""

    target_w: Number
    cards: list[CapResultDocument]


class ServingActionDocument(Document):
    """``POST /api/v1/serving/{action}``: accepted, with the engine's state now."""

    action: Literal["start", "stop", "restart"]
    accepted: bool
    already_running: bool | None = None
    in_progress: bool | None = None
    warnings: list[RefusalDocument] | None = None
    serving: ServingDocument


class LogsDocument(Document):
    """``GET /api/v1/serving/logs``."""

    lines: list[str]


class PresetOverrideDocument(Document):
    """A preset flag the recipe replaced or dropped (``recipe show`` says which)."""

    flag: str
    preset: list[str] = Field(description="the preset's tokens for the flag")
    recipe: list[str] = Field(description="the recipe's tokens for it (empty when dropped)")
    dropped: bool


class LaunchSpecDocument(Document):
    """The exact launch the daemon would run (secrets masked)."""

    mode: Literal["process", "docker", "podman"]
    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    url: str
    health_url: str
    models_url: str
    served_model_name: str | None
    container_name: str | None
    recipe_hash: str
    labels: dict[str, str]
    preset_overrides: list[PresetOverrideDocument] | None = None


class LastReadyLaunchDocument(Document):
    """The last launch that became ready (what the next one is diffed against)."""

    id: int
    started_at: IsoTime
    ready_at: IsoTime | None
    argv: list[str]
    env: dict[str, str]
    recipe_hash: str | None


class RecipeDocument(Document):
    """``GET /api/v1/serving/recipe``: the next launch and its diff to the last ready one."""

    spec: LaunchSpecDocument
    text: str = Field(description="the argv shell-quoted, as fleetctl recipe show prints it")
    last_ready: LastReadyLaunchDocument | None
    diff: list[str] | None = Field(description="unified diff lines; null with no ready launch")


class XidInjectedDocument(Document):
    """``POST /api/v1/sim/xid``: where the simulated kernel-log line went."""

    card: int
    xid: int
    seq: int
    boot_id: str


class CardChangedDocument(Document):
    """``POST /api/v1/sim/card/{index}``: the fields that changed."""

    card: int
    changed: list[str]


class SimRebootDocument(Document):
    """``POST /api/v1/sim/reboot``: the new boot id."""

    boot_id: str


class EngineCanariesDocument(Document):
    """One engine's canaries in ``GET /api/v1/canary``'s ``engines``."""

    engine: str = Field(description="the engine's profile (one of ``[serving] run``)")
    canaries: list[CanaryResultDocument]
    log_signatures: list[LogSignatureDocument] | None = Field(
        None, description="the primary engine's only (the counts are kept for its log)"
    )


class CanaryOverviewDocument(Document):
    """``GET /api/v1/canary``: last results, signature counts, recent history."""

    canaries: list[CanaryResultDocument]
    log_signatures: list[LogSignatureDocument]
    history: list[CanaryResultDocument]
    engines: list[EngineCanariesDocument] | None = Field(
        None,
        description="where several engines run: each engine's last results, the primary "
        "first (``canaries``, ``log_signatures`` and ``history`` stay the primary's)",
    )


class CanaryRunDocument(Document):
    """``POST /api/v1/canary/run``: this round's results and fleetctl's exit code."""

    canaries: list[CanaryResultDocument]
    exit_code: int = Field(description="0 all pass, 1 a warning or skipped, 2 a failure")
