"""One delivery thread per sink: the outbox's head, POSTed until a 2xx, in order.

The sender never holds an alert in memory only: it reads the oldest undelivered
notification of its sink from the store, sends it, and marks it delivered after a 2xx
(so a daemon killed between the two sends it again after restart: at least once, with
the notification's id for the receiver to de-duplicate). A failure keeps that same
notification at the head and waits an exponential backoff with jitter (``retry_min_s``
doubling up to ``retry_max_s``); one older than ``max_age_s`` is given up and recorded so.
One log line when a sink starts failing and one when it answers again, never one per try.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from daemon.alerts.formats import Notification, RenderContext, render
from daemon.alerts.signing import SIGNATURE_HEADER, sign
from daemon.alerts.sinks import Sink, display_url
from daemon.store import Store, StoreError
from daemon.store.alerts import NotificationRow
from hwcheck.threads import CrashReport, ServiceThread, Wake
from web.version import __version__

log = logging.getLogger("fleetd.alerts")

ID_HEADER = "X-Cmpfleet-Id"
# With nothing queued a sender still looks at the store this often (a wake-up is the
# normal path; this only bounds the delay should one ever be missed).
IDLE_RECHECK_S = 5.0
STORE_RETRY_S = 1.0
MAX_ANSWER_BYTES = 64 * 1024  # of a receiver's answer body: only its status is used
ANSWER_CHUNK_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class DeliveryTiming:
    """``[alerts]`` retry settings."""

    retry_min_s: float = 1.0
    retry_max_s: float = 30.0
    max_age_s: float = 86400.0


def backoff_s(failures: int, timing: DeliveryTiming, rng: random.Random) -> float:
    """The pause after ``failures`` failed tries in a row: doubling, capped, half jittered.

    Half fixed and half random ("equal jitter"): rigs that lost the same receiver do not
    retry in lockstep, and the pause never collapses to nothing.
    """
    ceiling = min(timing.retry_max_s, timing.retry_min_s * 2.0 ** max(0, failures - 1))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def user_agent() -> str:
    """``cmpfleet/<version>``."""
    return f"cmpfleet/{__version__}"


def read_capped(response: httpx.Response, cap_bytes: int = MAX_ANSWER_BYTES) -> int:
    """Read at most ``cap_bytes`` of a streamed answer's body; the bytes read.

    Only the status matters, but a receiver may answer with anything: a 50 MB body read
    whole took fleetd from 99 to 509 MB RSS after 21 alerts (issue 22). What is past the
    cap is never read: leaving the stream closes the connection instead.
    """
    read = 0
    for chunk in response.iter_raw(ANSWER_CHUNK_BYTES):
        read += len(chunk)
        if read >= cap_bytes:
            break
    return read


class SinkSender:
    """Delivers one sink's queue on its own thread."""

    def __init__(
        self,
        sink: Sink,
        store: Store,
        context: RenderContext,
        timing: DeliveryTiming,
        on_crash: CrashReport | None = None,
    ) -> None:
        self.sink = sink
        self._store = store
        self._context = context
        self._timing = timing
        self._rng = random.Random()  # noqa: S311 - jitter, not cryptography
        self._thread = ServiceThread(f"alerts-{sink.name}", self._run, on_crash=on_crash, log=log)
        # When this sink began failing (monotonic: a wall-clock step must not bend the
        # "delivering again after N s" figure).
        self._failing_since_s: float | None = None

    def start(self) -> None:
        """Start delivering."""
        self._thread.start()

    def wake(self) -> None:
        """Something was queued: look at the outbox now."""
        self._thread.wake()

    def stop(self, timeout_s: float) -> None:
        """Stop after the request in flight (its timeout bounds the wait)."""
        self._thread.stop(timeout_s)

    def _run(self, wake: Wake) -> None:
        with httpx.Client(
            timeout=self.sink.timeout_s, verify=True, follow_redirects=False, trust_env=False
        ) as client:
            failures, head = 0, -1
            while not wake.stopping:
                try:
                    note = self._store.next_notification(self.sink.name)
                except StoreError as exc:
                    log.warning("alerts %s: cannot read the outbox: %s", self.sink.name, exc)
                    wake.rest(STORE_RETRY_S)
                    continue
                if note is None:
                    wake.wait(IDLE_RECHECK_S)
                    continue
                if note.id != head:
                    failures, head = 0, note.id
                if not self._step(client, note, failures):
                    failures += 1
                    wake.rest(backoff_s(failures, self._timing, self._rng))

    def _step(self, client: httpx.Client, note: NotificationRow, failures: int) -> bool:
        """Try ``note`` once (or give it up when too old); False when it must be retried."""
        now = datetime.now(UTC)
        try:
            age_s = (now - note.created_at).total_seconds()
            if age_s > self._timing.max_age_s:
                reason = f"given up: still undelivered after {age_s:.0f} s (max_age_s)"
                self._store.notification_given_up(note.id, reason, now)
                log.error("alerts %s: notification %s %s", self.sink.name, note.uid, reason)
                return True
            error = self._send(client, note)
            if error is None:
                self._store.notification_delivered(note.id)
                self._recovered()
                return True
            self._store.notification_failed(note.id, error)
        except StoreError as exc:
            log.warning("alerts %s: cannot record a delivery: %s", self.sink.name, exc)
            return False
        if self._failing_since_s is None:
            self._failing_since_s = time.monotonic()
            log.warning(
                "alerts %s (%s): delivery failed: %s; retrying with backoff up to %.0f s",
                self.sink.name,
                display_url(self.sink.url),
                error,
                self._timing.retry_max_s,
            )
        return False

    def _recovered(self) -> None:
        if self._failing_since_s is not None:
            down_s = time.monotonic() - self._failing_since_s
            log.warning("alerts %s: delivering again after %.0f s", self.sink.name, down_s)
            self._failing_since_s = None

    def _send(self, client: httpx.Client, note: NotificationRow) -> str | None:
        """POST the notification; ``None`` on a 2xx, else one line saying what went wrong."""
        body = render(
            self.sink.format, Notification(note.uid, note.payload, note.created_at), self._context
        )
        headers = {
            "Content-Type": "application/json",
            "User-Agent": user_agent(),
            ID_HEADER: note.uid,
        }
        if self.sink.secret is not None:
            headers[SIGNATURE_HEADER] = sign(self.sink.secret, body)
        try:
            with client.stream("POST", self.sink.url, content=body, headers=headers) as response:
                read_capped(response)
        except httpx.HTTPError as exc:
            return self._scrub(f"{exc.__class__.__name__}: {exc}")
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code} {response.reason_phrase}".strip()

    def _scrub(self, text: str) -> str:
        """An error line without the URL's path or query (Slack/Discord keep the key there)."""
        return text.replace(self.sink.url, display_url(self.sink.url)).splitlines()[0]
