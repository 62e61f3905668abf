"""The crash black box with its sources faked at their boundary (fleetd's parts).

A note from recovery returns at once and the bundle is written on the black box's own
thread; the notes of one event make one bundle; a bundle that cannot be written is said
in the status and never raises; each ready is fingerprinted against the last good one;
the third fault on a card escalates once.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.evidence import recorder as recorder_module
from daemon.evidence.boot_watch import FINGERPRINT_WAIT_S
from daemon.evidence.recorder import EvidenceRecorder
from daemon.evidence.sources import EvidenceSources, RecipeFacts
from hwcheck.model import GpuSnapshot, RigSnapshot, Severity
from recovery.ports import StopNotice
from serving.evidence.settings import EvidenceSettings
from serving.recipe.masking import MASK, KnownSecrets
from tests.support.waiting import wait_until

API_KEY = "sk-RECORDER-KEY-1"
FAULT = (
    "(Worker_PP3 pid=7) ERROR [multiproc_executor.py:671] RuntimeError: CUDA error: an "
    "illegal memory access was encountered"
)
DUMP = (
    "(EngineCore_0 pid=6) ERROR [dump_input.py:76] Dumping scheduler output for model "
    "execution: SchedulerOutput(scheduled_new_reqs=[NewRequestData(req_id=chatcmpl-9,"
    "prompt_token_ids_len=140000,mm_features=[])],)"
)


def card(index: int, total_mib: int = 65536, used_mib: int = 50_000) -> GpuSnapshot:
    return GpuSnapshot(
        index=index,
        pci_bus_id=f"0000:{index:02x}:00.0",
        uuid=f"GPU-{index}",
        name="NVIDIA CMP 170HX",
        serial=f"SER{index}",
        driver_version="580.95.05",
        memory_total_mib=total_mib,
        memory_used_mib=used_mib,
    )


@dataclass
class Rig:
    """The parts the black box reads, as plain values a test changes."""

    cards: tuple[GpuSnapshot, ...] = tuple(card(i) for i in range(4))
    log: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=lambda: {"VLLM_PP_LAYER_PARTITION": "12,12,12,7"})
    good_env: dict[str, str] | None = None
    ready: str | None = None
    launch_log: list[str] | None = None  # the current launch's lines (None: no such reader)
    fresh: Callable[[], tuple[GpuSnapshot, ...]] | None = None  # NVML read now (None: none)
    sides: dict[str, Rig] = field(default_factory=dict)  # engines beside it, by profile
    events: list[tuple[Severity, str, dict[str, Any]]] = field(default_factory=list)

    def launches(self) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
        launch = {"id": 2, "argv": ["serve", "--api-key", API_KEY], "env": self.env}
        good = None if self.good_env is None else {"id": 1, "argv": ["serve"], "env": self.good_env}
        return launch, good

    def sources(self) -> EvidenceSources:
        known = KnownSecrets({API_KEY})
        return EvidenceSources(
            cards=lambda: self.cards,
            xids=lambda: (),
            log_tail=lambda lines: self.log[-lines:],
            launches=self.launches,
            build=lambda: {"image_digest": "sim@sha256:1"},
            engine_metrics=lambda: {"kv_cache_usage_pct": 12.0, "requests_running": 1.0},
            deep_canaries=lambda: [{"name": "copy_depth", "result": "pass"}],
            memtested_cards=frozenset,
            recipe=lambda: RecipeFacts("hash1", 4, (0, 1, 2, 3), "12,12,12,7", 256, self.env),
            host=lambda: {"driver_version": "580.95.05", "kernel": "6.8.0-45"},
            mask=known.mask,
            record_event=lambda severity, message, details: self.events.append(
                (severity, message, details)
            ),
            engine_ready=lambda: self.ready,
            card_of=lambda address: None,
            launch_log_tail=None
            if self.launch_log is None
            else (lambda lines: (self.launch_log or [])[-lines:]),
            fresh_cards=self.fresh,
            of_engine=(lambda name: self.sides[name].sources() if name in self.sides else None)
            if self.sides
            else None,
        )


def recorder(
    tmp_path: Path, rig: Rig, settle_s: float = 0.0, clock: Callable[[], float] = time.monotonic
) -> EvidenceRecorder:
    return EvidenceRecorder(
        tmp_path,
        EvidenceSettings(),
        rig.sources(),
        settle_s=settle_s,
        hostname=lambda: "rig7",
        clock=clock,
    )


def xid_notice(card_index: int = 3) -> StopNotice:
    return StopNotice("xid", "stop_and_latch", "Xid 31 on card 3", card_index, ((31, card_index),))


def snapshot(cards: tuple[GpuSnapshot, ...], at_s: float) -> RigSnapshot:
    return RigSnapshot(datetime.now(UTC), at_s, cards, "580.95.05")


def test_a_bundle_holds_every_part_and_the_verdict(tmp_path: Path) -> None:
    rig = Rig(log=["INFO ready", DUMP, FAULT])
    box = recorder(tmp_path, rig)
    box.on_snapshot(snapshot(rig.cards, 1.0))
    bundle_id = box.capture([xid_notice()])
    assert bundle_id is not None
    parts = box.bundles.read(bundle_id)
    assert set(parts) == {
        "summary",
        "cards",
        "kernel",
        "inflight",
        "launch",
        "engine",
        "fingerprint",
        "engine_log",
    }
    assert parts["cards"]["cards"][3]["serial"] == "SER3"
    assert len(parts["cards"]["samples"]) == 1
    assert parts["inflight"]["requests"] == [
        {"id": "chatcmpl-9", "depth_tokens": 140000, "source": "engine"}
    ]
    assert parts["engine"]["metrics"]["kv_cache_usage_pct"] == 12.0
    assert parts["engine"]["deep_canaries"][0]["name"] == "copy_depth"
    summary = parts["summary"]
    assert summary["verdict"]["rule"] == "row_chunk_unset"
    assert (summary["card"], summary["rank"], summary["depth_tokens"]) == (3, 3, 140000)
    assert API_KEY not in json.dumps(parts)
    assert rig.events[-1][2]["bundle_id"] == bundle_id
    assert rig.events[-1][2]["verdict"] == "row_chunk_unset"
    assert box.status()["degraded"] is None


def test_the_launch_is_diffed_against_the_last_that_reached_ready(tmp_path: Path) -> None:
    rig = Rig(log=[FAULT], good_env={"DSV4_LOGITS_ROW_CHUNK": "64"}, env={"OTHER": "1"})
    box = recorder(tmp_path, rig)
    bundle_id = box.capture([xid_notice()])
    assert bundle_id is not None
    launch = box.bundles.read(bundle_id)["launch"]
    assert launch["env_diff"] == {
        "added": ["OTHER"],
        "dropped": ["DSV4_LOGITS_ROW_CHUNK"],
        "changed": [],
    }
    assert launch["argv_diff"]["added"] == ["--api-key", MASK]
    assert API_KEY not in json.dumps(launch)


def test_a_note_returns_at_once_and_one_event_makes_one_bundle(tmp_path: Path) -> None:
    rig = Rig(log=[FAULT])
    box = recorder(tmp_path, rig, settle_s=2.0)
    box.start()
    try:
        began = time.monotonic()
        box.witness(StopNotice("engine_exit", "restart_after", "exited", crash_class="cuda_fault"))
        box.witness(xid_notice())
        assert time.monotonic() - began < 0.5  # a queue put, never the bundle's reads
        wait_until(lambda: len(box.bundles.summaries()) == 1, 30, "the bundle")
    finally:
        box.stop()
    [summary] = box.bundles.summaries()
    assert len(summary["notices"]) == 2
    assert summary["kind"] == "xid31"
    assert box.counts() == {("cuda_fault", "row_chunk_unset"): 1}


def test_a_bundle_that_cannot_be_written_is_said_and_never_raises(tmp_path: Path) -> None:
    rig = Rig(log=[FAULT])
    box = recorder(tmp_path, rig)
    (tmp_path / "crashes").write_text("not a directory")  # as a full or broken disk refuses
    assert box.capture([xid_notice()]) is None
    degraded = box.status()["degraded"]
    assert degraded is not None and degraded.startswith("crash evidence could not be written")
    (tmp_path / "crashes").unlink()
    assert box.capture([xid_notice()]) is not None
    assert box.status()["degraded"] is None


def test_each_ready_is_fingerprinted_and_a_smaller_pool_names_the_card(tmp_path: Path) -> None:
    rig = Rig(log=["INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,476,563 tokens"])
    box = recorder(tmp_path, rig)
    rig.ready = "100@t0"
    box.on_snapshot(snapshot(rig.cards, 1.0))
    first = box.fingerprints.latest
    assert first is not None and first.kv_tokens == 1_476_563 and not first.warnings
    box.on_snapshot(snapshot(rig.cards, 2.0))  # the same run: not again
    assert box.fingerprints.latest is first
    smaller = (*rig.cards[:2], card(2, total_mib=61440), rig.cards[3])
    rig.log.append("INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,180,000 tokens")
    rig.ready = "200@t1"
    box.on_snapshot(snapshot(smaller, 3.0))
    latest = box.fingerprints.latest
    assert latest is not None and latest.kv_tokens == 1_180_000
    [warning] = latest.warnings
    assert "card 2 (serial SER2) reports 61,440 MiB, was 65,536 MiB" in warning
    assert rig.events[-1][0] is Severity.WARNING and rig.events[-1][2]["evidence"] == "kv_drop"
    # The smaller boot never becomes the yardstick: a third one is held to the first.
    again = recorder(tmp_path, rig)
    good = again.fingerprints.last_good("hash1")
    assert good is not None and good.kv_tokens == 1_476_563


def test_a_ready_waits_for_its_own_launchs_pool_line(tmp_path: Path) -> None:
    """The log is read by a polling thread: at ready the new pool line may be unread yet.

    The previous launch's line, still in the whole tail, must not pass for this one's (it
    hid a smaller pool after a reboot); the ready is fingerprinted once its own line is in,
    and without one only after ``FINGERPRINT_WAIT_S``.
    """
    now_s = [0.0]
    old_line = "INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,476,563 tokens"
    rig = Rig(log=[old_line], launch_log=[])
    box = recorder(tmp_path, rig, clock=lambda: now_s[0])
    rig.ready = "100@t0"
    box.on_snapshot(snapshot(rig.cards, 1.0))
    assert box.fingerprints.latest is None  # waits: the launch's own line is not read yet
    rig.launch_log.append("INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,180,000 tokens")
    now_s[0] = 1.0
    box.on_snapshot(snapshot(rig.cards, 2.0))
    first = box.fingerprints.latest
    assert first is not None and first.kv_tokens == 1_180_000
    # A launch whose engine never prints the line: fingerprinted without it, once, late.
    rig.launch_log = []
    rig.ready = "200@t1"
    box.on_snapshot(snapshot(rig.cards, 3.0))
    assert box.fingerprints.latest is first
    now_s[0] = 1.0 + FINGERPRINT_WAIT_S + 0.1
    box.on_snapshot(snapshot(rig.cards, 4.0))
    latest = box.fingerprints.latest
    assert latest is not None and latest is not first and latest.kv_tokens is None
    box.on_snapshot(snapshot(rig.cards, 5.0))
    assert box.fingerprints.latest is latest


def test_the_third_fault_on_a_card_escalates_once(tmp_path: Path) -> None:
    spec = (
        '(Worker_PP3 pid=9) ERROR   File "/vllm/v1/sample/rejection_sampler.py", line 184, '
        "in forward (speculative verify)"
    )
    rig = Rig(log=[spec, FAULT], env={"DSV4_LOGITS_ROW_CHUNK": "64"})
    box = recorder(tmp_path, rig)
    for _ in range(4):
        assert box.capture([xid_notice()]) is not None
    escalations = [e for e in rig.events if e[2].get("evidence") == "escalation"]
    assert len(escalations) == 1
    severity, message, details = escalations[0]
    assert severity is Severity.CRITICAL
    assert message == (
        "recurring fault: third illegal memory access on card 3 (rank 3) in 7 days, all "
        "during speculative verify"
    )
    assert "stress memory test of card 3" in details["advice"]
    newest = box.bundles.summaries()[0]
    assert newest["recurrence"]["illegal_memory_access/serial:SER3"] == 4
    assert newest["recurrence"]["illegal_memory_access/rank:3"] == 4


def test_the_cards_are_read_from_nvml_after_the_stop_when_it_answers(tmp_path: Path) -> None:
    """What the reboot would wipe is read right after the stop, not the last poll's."""
    now = tuple(card(i, used_mib=60_000) for i in range(4))
    rig = Rig(fresh=lambda: now)
    box = recorder(tmp_path, rig)
    box.on_snapshot(snapshot(rig.cards, 1.0))
    bundle_id = box.capture([xid_notice()])
    assert bundle_id is not None
    parts = box.bundles.read(bundle_id)
    assert parts["cards"]["read"] == "fresh"
    assert [c["memory_used_mib"] for c in parts["cards"]["cards"]] == [60_000] * 4
    assert parts["cards"]["samples"][0]["cards"][0]["memory_used_mib"] == 50_000


def test_nvml_that_fails_or_hangs_leaves_the_last_polls_reading_and_one_read_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A card off the bus can hang an NVML call: the bundle does not wait on it for long,
    and no second read piles up behind the one still hanging."""
    monkeypatch.setattr(recorder_module, "FRESH_READ_S", 0.2)
    release = threading.Event()
    calls: list[int] = []

    def hangs() -> tuple[GpuSnapshot, ...]:
        calls.append(1)
        release.wait(30)
        return ()

    rig = Rig(fresh=hangs)
    box = recorder(tmp_path, rig)
    box.on_snapshot(snapshot(rig.cards, 1.0))
    try:
        for _ in range(2):
            bundle_id = box.capture([xid_notice()])
            assert bundle_id is not None
            parts = box.bundles.read(bundle_id)
            assert parts["cards"]["read"] == "last_poll"
            assert parts["cards"]["cards"][3]["serial"] == "SER3"
        assert calls == [1]
    finally:
        release.set()

    def fails() -> tuple[GpuSnapshot, ...]:
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    (tmp_path / "b").mkdir()
    failing = recorder(tmp_path / "b", Rig(fresh=fails))
    failing.on_snapshot(snapshot(Rig().cards, 1.0))
    bundle_id = failing.capture([xid_notice()])
    assert bundle_id is not None
    assert failing.bundles.read(bundle_id)["cards"]["read"] == "last_poll"


def test_a_side_engines_own_event_keeps_its_own_log_and_a_host_wide_one_the_primarys(
    tmp_path: Path,
) -> None:
    """On a rig of two engines the bundle holds the log of the engine the event was of."""
    qwen = Rig(log=["INFO qwen ready", FAULT])
    rig = Rig(log=["INFO primary ready"], sides={"qwen": qwen})
    box = recorder(tmp_path, rig)
    box.on_snapshot(snapshot(rig.cards, 1.0))
    crash = StopNotice("engine_exit", "restart_after", "crashed", None, (), "cuda_error", 1)
    own = box.capture([dataclasses.replace(crash, engine="qwen")])
    assert own is not None
    parts = box.bundles.read(own)
    assert parts["summary"]["engine"] == "qwen"
    assert parts["summary"]["notices"][0]["engine"] == "qwen"
    assert "INFO qwen ready" in parts["engine_log"] and "primary" not in parts["engine_log"]
    # Every controller hears a hardware Xid: one bundle, the primary's evidence.
    both = box.capture([xid_notice(), dataclasses.replace(xid_notice(), engine="qwen")])
    assert both is not None
    parts = box.bundles.read(both)
    assert parts["summary"]["engine"] is None
    assert "INFO primary ready" in parts["engine_log"] and "qwen" not in parts["engine_log"]
