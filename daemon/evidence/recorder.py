"""The crash black box: one bundle per event, written beside recovery, never in its way.

Recovery tells it of each latch, each stop it makes and each engine exit nobody asked
for (``recovery.ports.StopWitness``), after the latch is set and the stop is under way:
``witness`` only queues a note. On its own thread it then reads first what a reboot
wipes (every card's full NVML reading and its last 120 s of samples, kept here from each
poll; the kernel-log window with each record's sequence; the requests in flight), writes
those parts at once, waits a moment for the rest of the same event (an Xid 31 is read a
moment after the engine it killed exits: one bundle, not two), then reads the rest (the
engine log tail, the launch and its diff against the last launch that reached ready, the
build, the engine's figures, the deep canaries), judges it (``serving.evidence.triage``),
counts its recurrence and records one ``crash`` event (the webhook's). A bundle that
cannot be written (a full disk, a read-only dir) is said in ``status()`` (the status's
``recovery.evidence``) and logged once; recovery never waits for it.

Each poll also goes to the boot watch (``daemon.evidence.boot_watch``): the fingerprint of
each engine ready against the last good one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import queue
import re
import shutil
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.evidence.boot_watch import BootWatch
from daemon.evidence.fingerprints import FingerprintBook
from daemon.evidence.sources import EvidenceSources, RecipeFacts
from hwcheck.model import GpuSnapshot, RigSnapshot, Severity
from hwcheck.threads import CrashReport, ServiceThread, Wake, run_in_thread
from recovery.ports import StopNotice
from serving.evidence import inflight, recurrence, triage
from serving.evidence.bundles import BundleStore, new_bundle_id
from serving.evidence.settings import EvidenceSettings
from serving.recipe.masking import mask_argv, mask_env

LOG = logging.getLogger("fleetd.evidence")
SAMPLES_WINDOW_S = 120.0
KERNEL_WINDOW_S = 600.0
KERNEL_LINES = 400  # the driver's last lines of this boot kept beside the Xids
_DRIVER_LINE = re.compile(r"NVRM|nvidia|Xid", re.IGNORECASE)
SETTLE_S = 1.5
# How long the bundle waits on NVML read now (an 8-card reading takes well under a second;
# a card off the bus can hang a call for tens of seconds).
FRESH_READ_S = 5.0
STOP_SIGNAL_WAIT_S = 3.0
LOG_TAIL_LINES = 4000
MIB = 1024 * 1024
EVENT_PREFIX = "crash bundle"


def _card_doc(card: GpuSnapshot) -> dict[str, Any]:
    doc = dataclasses.asdict(card)
    doc["clock_event_names"] = card.clock_event_names
    return doc


def env_diff(now: Mapping[str, str], good: Mapping[str, str]) -> dict[str, Any]:
    """What changed in the environment since the last launch that reached ready."""
    return {
        "added": sorted(set(now) - set(good)),
        "dropped": sorted(set(good) - set(now)),
        "changed": sorted(k for k in set(now) & set(good) if now[k] != good[k]),
    }


def argv_diff(now: Sequence[str], good: Sequence[str]) -> dict[str, Any]:
    """The arguments only one of the two launches had."""
    return {
        "added": [arg for arg in now if arg not in good],
        "dropped": [arg for arg in good if arg not in now],
    }


class EvidenceRecorder:
    """The black box: a ``StopWitness`` for recovery and a snapshot listener for the poll."""

    def __init__(
        self,
        state_dir: Path,
        settings: EvidenceSettings,
        sources: EvidenceSources,
        *,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
        hostname: Callable[[], str] = socket.gethostname,
        on_crash: CrashReport | None = None,
    ) -> None:
        self.settings = settings
        self.bundles = BundleStore(state_dir, settings.max_total_mib * MIB)
        self.fingerprints = FingerprintBook(self.bundles.root)
        self.boots = BootWatch(self.fingerprints, sources, settings, clock)
        self._sources = sources
        self._settle_s = settle_s
        self._clock = clock
        self._hostname = hostname
        self._lock = threading.Lock()
        self._notes: queue.Queue[StopNotice | None] = queue.Queue()
        self._samples: deque[RigSnapshot] = deque()
        self._last_metrics: Mapping[str, Any] | None = None
        self._last_sessions: list[Mapping[str, Any]] = []
        self.degraded: str | None = None
        self.degraded_at: str | None = None
        self.last_bundle: str | None = None
        self._counts: Counter[tuple[str, str]] = Counter()
        self._thread = ServiceThread("evidence", self._work, on_crash=on_crash, log=LOG)
        self._fresh_read: ServiceThread | None = None

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Count the bundles kept so far (``/metrics`` reads memory only); start the thread."""
        self._counts = self._count()
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Finish the notes queued so far (bounded), then end."""
        self._notes.put(None)
        self._thread.join(timeout_s)
        self._thread.request_stop()

    # -- recovery's witness (must not block) --------------------------------------------
    def witness(self, notice: StopNotice) -> None:
        """Queue the note; everything is read on the black box's own thread."""
        self._notes.put(notice)

    # -- the poll's listener -------------------------------------------------------------
    def on_snapshot(self, snapshot: RigSnapshot) -> None:
        """Keep 120 s of samples and the engine's last figures; fingerprint a new ready."""
        now_s = snapshot.monotonic_s
        with self._lock:
            self._samples.append(snapshot)
            while self._samples and now_s - self._samples[0].monotonic_s > SAMPLES_WINDOW_S:
                self._samples.popleft()
        with contextlib.suppress(Exception):
            metrics = self._sources.engine_metrics()
            if metrics:
                self._last_metrics = metrics
        sessions = self._sources.guard_sessions
        if sessions is not None:
            with contextlib.suppress(Exception):
                self._last_sessions = list(sessions())
        self.boots.on_poll(snapshot)

    # -- the thread ------------------------------------------------------------------------
    def _work(self, wake: Wake) -> None:
        while (first := self._notes.get()) is not None:
            self.capture([first])

    def capture(self, notices: list[StopNotice]) -> str | None:
        """Write one bundle for ``notices`` (and the notes that follow within the settle).

        Returns the bundle's id, or None when it could not be written (said in ``status``).
        """
        at = datetime.now(UTC)
        self._after_the_stop_signal(self._engine_sources(notices[:1])[1])
        started_s = self._clock()
        # What a reboot wipes, right after the latch and the stop signal: NVML read now
        # (bounded: a wedged card must not hold the bundle), else the last poll's reading.
        read, readings = self._cards_now()
        cards = [_card_doc(card) for card in readings]
        with self._lock:
            samples = list(self._samples)
        kernel = self._read(self._kernel_window, [])
        sessions = [item.as_dict() for item in inflight.from_guard(self._last_sessions)]
        metrics = self._last_metrics
        kind = _kind_of(notices)
        bundle: Path | None = None
        try:
            bundle = self.bundles.open(new_bundle_id(at, kind))
            self._write(
                bundle,
                "cards.json",
                {"read": read, "cards": cards, "samples": [_sample_doc(s) for s in samples]},
            )
            self._write(bundle, "kernel.json", {"records": kernel})
            # The rest of the same event (the Xid read after the exit), then the rest.
            deadline = started_s + self._settle_s
            while (left := deadline - self._clock()) > 0:
                try:
                    more = self._notes.get(timeout=left)
                except queue.Empty:
                    break
                if more is None:
                    self._notes.put(None)  # the stop: after this bundle
                    break
                notices.append(more)
            kind = _kind_of(notices)
            engine, sources = self._engine_sources(notices)
            if engine is not None:  # a side engine's own event: its figures, read now
                metrics = self._read(sources.engine_metrics, None)
            summary = self._rest(bundle, at, notices, kind, cards, metrics, sessions, sources)
            summary["engine"] = engine
            self._write(bundle, "summary.json", summary)
            self.bundles.prune(keep=bundle.name)
            self._counts = self._count()
        except OSError as exc:
            self._degrade(exc, bundle)
            return None
        self.last_bundle = bundle.name
        if self.degraded is not None:
            LOG.warning("crash evidence is written again (bundle %s)", bundle.name)
        self.degraded = None
        self.degraded_at = None
        self._announce(summary)
        return bundle.name

    def _engine_sources(self, notices: list[StopNotice]) -> tuple[str | None, EvidenceSources]:
        """Whose engine the event is: its name (None: the primary) and its readers.

        A side engine's alone when every note is its (its crash, its canary); else the
        primary's (a host-wide Xid reaches every engine's controller, and the primary's
        evidence stands for it).
        """
        names = {notice.engine for notice in notices}
        of_engine = self._sources.of_engine
        name = next(iter(names)) if len(names) == 1 else None
        if name is not None and of_engine is not None:
            found = self._read(lambda: of_engine(name), None)
            if found is not None:
                return name, found
        return None, self._sources

    def _after_the_stop_signal(self, sources: EvidenceSources) -> None:
        """Wait (at most ``STOP_SIGNAL_WAIT_S``) until a serving engine got its stop signal.

        The latch and the stop signal come first: the black box's reads and writes (its
        fsyncs share the disk with the store's) start once the engine left ``ready``, or at
        once when none was serving (an exit, an Xid with the engine down).
        """
        deadline = self._clock() + STOP_SIGNAL_WAIT_S
        waiting = threading.Event()
        while self._clock() < deadline:
            try:
                if sources.engine_ready() is None:
                    return
            except Exception:
                return
            waiting.wait(0.02)

    def _rest(
        self,
        bundle: Path,
        at: datetime,
        notices: list[StopNotice],
        kind: str,
        cards: list[dict[str, Any]],
        metrics: Mapping[str, Any] | None,
        sessions: list[dict[str, Any]],
        sources: EvidenceSources,
    ) -> dict[str, Any]:
        mask = sources.mask
        tail = [
            inflight.without_prompts(mask(line))
            for line in self._read(lambda: sources.log_tail(LOG_TAIL_LINES), [])
        ]
        engine_requests = [item.as_dict() for item in inflight.from_engine_log(tail)]
        in_flight = engine_requests or sessions
        self._write(
            bundle,
            "inflight.json",
            {"requests": in_flight, "engine": engine_requests, "guard": sessions},
        )
        launch, good = self._read(sources.launches, (None, None))
        recipe = self._read(sources.recipe, None)
        launch_doc = self._launch_doc(launch, good, recipe, sources)
        self._write(bundle, "launch.json", launch_doc)
        self._write(
            bundle,
            "engine.json",
            {"metrics": metrics, "deep_canaries": self._read(sources.deep_canaries, [])},
        )
        fingerprint = self.fingerprints.latest
        self._write(
            bundle, "fingerprint.json", None if fingerprint is None else fingerprint.as_dict()
        )
        self.bundles.write_log(bundle, tail, self.bundles.budget_left(bundle) - 64 * 1024)
        facts = self._facts(notices, tail, recipe, launch_doc, in_flight, cards)
        verdict = triage.triage(facts)
        serial = _serial_of(cards, facts.fault_card)
        occurrence = recurrence.Occurrence(
            bundle_id=bundle.name,
            at=at,
            kind=_fault_kind(notices, facts),
            card=facts.fault_card,
            serial=serial,
            rank=facts.fault_rank,
            depth_tokens=facts.depth_tokens,
            build=(launch_doc.get("build") or {}).get("image_digest")
            or launch_doc.get("recipe_hash"),
            during="speculative verify" if verdict.rule == "spec_verify_fault" else None,
        )
        earlier = self._occurrences()
        escalation = recurrence.escalation(occurrence, earlier)
        grouped = recurrence.groups([*earlier, occurrence])
        # How many bundles share this one's card serial, rank, depth band and build.
        together = {key: len(ids) for key, ids in grouped.items() if bundle.name in ids}
        first = notices[0]
        return {
            "id": bundle.name,
            "ts": at.isoformat(timespec="seconds"),
            "kind": kind,
            "trigger": first.trigger,
            "action": first.action,
            "reason": first.reason,
            "notices": [dataclasses.asdict(notice) for notice in notices],
            "crash_class": facts.crash_class,
            "fault": occurrence.kind,
            "card": facts.fault_card,
            "serial": serial,
            "rank": facts.fault_rank,
            "depth_tokens": facts.depth_tokens,
            "depth_band": recurrence.depth_band(facts.depth_tokens),
            "build": occurrence.build,
            "verdict": verdict.as_dict(),
            "escalation": None if escalation is None else dataclasses.asdict(escalation),
            "recurrence": together,
            "host": self._read(self._hostname, None),
            "parts": sorted(path.name for path in bundle.iterdir()),
        }

    def _launch_doc(
        self,
        launch: Mapping[str, Any] | None,
        good: Mapping[str, Any] | None,
        recipe: RecipeFacts | None,
        sources: EvidenceSources,
    ) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "recipe_hash": None if recipe is None else recipe.recipe_hash,
            "launch": launch,
            "last_ready_launch_id": None if good is None else good.get("id"),
            "build": self._read(sources.build, None),
        }
        if launch is not None:
            env_now = mask_env(dict(launch.get("env") or {}))
            argv_now = list(launch.get("argv") or [])
            doc["launch"] = {**launch, "env": env_now, "argv": mask_argv(argv_now)}
            if good is not None:
                doc["env_diff"] = env_diff(env_now, mask_env(dict(good.get("env") or {})))
                doc["argv_diff"] = argv_diff(
                    mask_argv(argv_now), mask_argv(list(good.get("argv") or []))
                )
        return doc

    def _facts(
        self,
        notices: list[StopNotice],
        tail: list[str],
        recipe: RecipeFacts | None,
        launch_doc: Mapping[str, Any],
        in_flight: list[dict[str, Any]],
        cards: list[dict[str, Any]],
    ) -> triage.Facts:
        xids = tuple(xid for notice in notices for xid in notice.xids)
        if not xids:
            xids = tuple(self._read(self._recent_xids, ()))
        crash_class = next((n.crash_class for n in notices if n.crash_class), None)
        line = triage.fault_line(tail)
        rank = None if line is None else triage.rank_in(line)
        order = (
            list(recipe.cards)
            if recipe is not None and recipe.cards
            else sorted(int(card["index"]) for card in cards)
        )
        card = next((card for _, card in xids if card is not None), None)
        if card is None:
            card = next((n.card for n in notices if n.card is not None), None)
        if rank is None and card is not None and card in order:
            rank = order.index(card)
        if card is None and rank is not None and rank < len(order):
            card = order[rank]
        launch = launch_doc.get("launch") or {}
        env = dict(launch.get("env") or (recipe.env if recipe is not None else {}))
        diff = launch_doc.get("env_diff") or {}
        return triage.Facts(
            crash_class=crash_class,
            log_tail=tuple(tail[-400:]),
            xids=xids,
            fault_rank=rank,
            fault_card=card,
            pp_size=None if recipe is None else recipe.pp_size,
            card_count=len(order) or None,
            depth_tokens=inflight.deepest(
                inflight.InFlight(str(item["id"]), int(item["depth_tokens"]), "")
                for item in in_flight
            ),
            env=env,
            dropped_env=tuple(diff.get("dropped") or ()),
            memtested_cards=self._read(self._sources.memtested_cards, frozenset()),
            ready_for_s=next((n.ready_for_s for n in notices if n.ready_for_s), None),
        )

    def _recent_xids(self) -> tuple[tuple[int, int | None], ...]:
        found: list[tuple[int, int | None]] = []
        now = datetime.now(UTC)
        for item in self._sources.xids():
            ts = item.event.ts_kernel
            if ts is not None and (now - ts).total_seconds() > 60:
                continue
            if item.info.advice is None:
                continue
            found.append((item.event.xid, self._sources.card_of(item.event.pci_bus_id)))
        return tuple(found)

    def _kernel_window(self) -> list[dict[str, Any]]:
        """The Xids of the window, then the driver's other lines (NVRM) of this boot's ring."""
        rows = self._xid_window()
        reader = self._sources.kernel_records
        if reader is None:
            return rows
        seen = {row["seq"] for row in rows if row["seq"] is not None}
        driver = [
            record
            for record in reader()
            if _DRIVER_LINE.search(record.text) and record.seq not in seen
        ]
        for record in driver[-KERNEL_LINES:]:
            rows.append(
                {
                    "seq": record.seq,
                    "boot_id": record.boot_id,
                    "usec_since_boot": record.timestamp_usec,
                    "text": self._sources.mask(record.text),
                }
            )
        return rows

    def _xid_window(self) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        rows = []
        for item in self._sources.xids():
            event = item.event
            ts = event.ts_kernel
            if ts is not None and (now - ts).total_seconds() > KERNEL_WINDOW_S:
                continue
            rows.append(
                {
                    "seq": event.seq,
                    "boot_id": event.boot_id,
                    "ts": None if ts is None else ts.isoformat(),
                    "xid": event.xid,
                    "pci_bus_id": event.pci_bus_id,
                    "text": self._sources.mask(event.text),
                    "card": self._sources.card_of(event.pci_bus_id),
                    "class": str(item.info.xid_class),
                }
            )
        return rows

    def _occurrences(self) -> list[recurrence.Occurrence]:
        found: list[recurrence.Occurrence] = []
        for doc in self.bundles.summaries():
            try:
                found.append(
                    recurrence.Occurrence(
                        bundle_id=str(doc["id"]),
                        at=datetime.fromisoformat(str(doc["ts"])),
                        kind=str(doc.get("fault") or ""),
                        card=doc.get("card"),
                        serial=doc.get("serial"),
                        rank=doc.get("rank"),
                        depth_tokens=doc.get("depth_tokens"),
                        build=doc.get("build"),
                        during=(
                            "speculative verify"
                            if (doc.get("verdict") or {}).get("rule") == "spec_verify_fault"
                            else None
                        ),
                    )
                )
            except (KeyError, ValueError, TypeError):
                continue
        return found

    def _announce(self, summary: Mapping[str, Any]) -> None:
        verdict = summary["verdict"]
        where = []
        if summary.get("card") is not None:
            where.append(f"card {summary['card']}")
        if summary.get("rank") is not None:
            where.append(f"rank {summary['rank']}")
        if summary.get("depth_tokens") is not None:
            where.append(f"{summary['depth_tokens']:,} tokens")
        at = f" ({', '.join(where)})" if where else ""
        details = {
            "evidence": "bundle",
            "bundle_id": summary["id"],
            "crash_class": summary.get("crash_class"),
            "fault": summary.get("fault"),
            "verdict": verdict["rule"],
            "confidence": verdict["confidence"],
            "advice": verdict["advice"],
            "card": summary.get("card"),
            "serial": summary.get("serial"),  # the card's passport finds its crashes by it
            "rank": summary.get("rank"),
            "depth_tokens": summary.get("depth_tokens"),
        }
        self._sources.record_event(
            Severity.WARNING,
            f"{EVENT_PREFIX} {summary['id']}: {verdict['summary']}{at}",
            details,
        )
        escalation = summary.get("escalation")
        if escalation:
            self._sources.record_event(
                Severity.CRITICAL,
                f"recurring fault: {escalation['summary']}",
                {
                    "evidence": "escalation",
                    "bundle_id": summary["id"],
                    "key": escalation["key"],
                    "count": escalation["count"],
                    "advice": escalation["advice"],
                    "bundle_ids": escalation["bundle_ids"],
                    "verdict": verdict["rule"],
                },
            )

    def _write(self, bundle: Path, name: str, doc: Any) -> int:
        """One part, every text in it masked again (argv, provenance, kernel lines)."""
        text = (
            doc if isinstance(doc, str) else json.dumps(doc, indent=2, sort_keys=True, default=str)
        )
        return self.bundles.write_part(bundle, name, self._sources.mask(text) + "\n")

    def _degrade(self, exc: OSError, bundle: Path | None) -> None:
        words = exc.strerror or str(exc)
        where = exc.filename or (bundle if bundle is not None else self.bundles.root)
        message = f"crash evidence could not be written ({where}: {words})"
        if self.degraded is None:
            LOG.warning("%s; recovery goes on without it", message)
        self.degraded = message
        self.degraded_at = datetime.now(UTC).isoformat(timespec="seconds")
        if bundle is not None:
            shutil.rmtree(bundle, ignore_errors=True)

    def _cards_now(self) -> tuple[str, tuple[GpuSnapshot, ...]]:
        """Every card's NVML reading now (``fresh``), else the last poll's (``last_poll``).

        The read runs on a thread of its own and is waited on for ``FRESH_READ_S``: an NVML
        call on a card that fell off the bus can hang for long, and the bundle is written
        with the poll's reading meanwhile. Only one such read is ever outstanding.
        """
        reader = self._sources.fresh_cards
        pending = self._fresh_read
        if reader is not None and (pending is None or not pending.alive()):
            answer: list[tuple[GpuSnapshot, ...]] = []

            def read() -> None:
                with contextlib.suppress(Exception):  # NVML down: the poll's reading
                    answer.append(reader())

            self._fresh_read = run_in_thread("evidence-nvml", read, log=LOG)
            self._fresh_read.join(FRESH_READ_S)
            if answer and answer[0]:
                return "fresh", answer[0]
            LOG.warning("crash evidence: NVML gave no reading now: the last poll's is kept")
        return "last_poll", self._read(self._sources.cards, ())

    def _read(self, reader: Callable[[], Any], default: Any) -> Any:
        try:
            return reader()
        except Exception as exc:  # one part missing must not lose the bundle
            LOG.warning("crash evidence: a part could not be read: %s", exc)
            return default

    # -- readers for the API, the status and /metrics -------------------------------------
    def mask(self, text: str) -> str:
        """``text`` masked like every other surface (the recipes' secrets, fleetd's own)."""
        return self._sources.mask(text)

    def status(self) -> dict[str, Any]:
        """The status's ``recovery.evidence``: bundles kept, the last, and a write failure."""
        return {
            "bundles": len(self.bundles.ids()),
            "last_bundle": self.last_bundle,
            "degraded": self.degraded,
            "degraded_since": self.degraded_at,
            "fingerprint": None
            if self.fingerprints.latest is None
            else self.fingerprints.latest.as_dict(),
        }

    def counts(self) -> Counter[tuple[str, str]]:
        """Bundles kept, by crash class (or fault) and verdict: ``/metrics`` (from memory)."""
        return Counter(self._counts)

    def _count(self) -> Counter[tuple[str, str]]:
        found: Counter[tuple[str, str]] = Counter()
        for doc in self.bundles.summaries():
            crash_class = str(doc.get("crash_class") or doc.get("fault") or "none")
            found[(crash_class, str((doc.get("verdict") or {}).get("rule", "unknown")))] += 1
        return found


def _sample_doc(snapshot: RigSnapshot) -> dict[str, Any]:
    return {
        "taken_at": snapshot.taken_at.isoformat(),
        "cards": [
            {
                "index": card.index,
                "memory_used_mib": card.memory_used_mib,
                "power_draw_w": card.power_draw_w,
                "temperature_c": card.temperature_c,
                "memory_temperature_c": card.memory_temperature_c,
                "sm_clock_mhz": card.sm_clock_mhz,
                "memory_clock_mhz": card.memory_clock_mhz,
                "clock_event_reasons": card.clock_event_reasons,
                "utilization_gpu_pct": card.utilization_gpu_pct,
                "pcie_replay_count": card.pcie_replay_count,
                "lost": card.lost,
            }
            for card in snapshot.cards
        ],
    }


def _kind_of(notices: Sequence[StopNotice]) -> str:
    for notice in notices:
        if notice.xids:
            return f"xid{notice.xids[0][0]}"
    for notice in notices:
        if notice.crash_class:
            return notice.crash_class
    return notices[0].action if notices else "stop"


def _fault_kind(notices: Sequence[StopNotice], facts: triage.Facts) -> str:
    """The fault recurrence counts: an illegal memory access whatever said it first."""
    if facts.crash_class == "cuda_fault" or any(xid == 31 for xid, _ in facts.xids):
        return "illegal_memory_access"
    if facts.xids:
        return f"xid{facts.xids[0][0]}"
    return facts.crash_class or _kind_of(notices)


def _serial_of(cards: list[dict[str, Any]], index: int | None) -> str | None:
    if index is None:
        return None
    for card in cards:
        if card.get("index") == index:
            serial = card.get("serial")
            return None if serial is None else str(serial)
    return None
