"""One cell of load: N streams at once, each timed token by token, the cards metered meanwhile.

Every prompt starts with its own random prefix, so the prefix cache cannot serve one
stream's prompt from another's (or from an earlier run's): each cell measures prefill for
real. Generation is a fixed length with ``ignore_eos`` (vLLM's extra), so every stream
decodes the same number of tokens whatever the model would have said.

The simulated engine declares its clock in response headers (``serving.sim.perf``: wall
seconds per rig second); a real engine sends none (scale 1). Times are turned into a real
rig's units with it before any figure is made.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from hwcheck.threads import run_in_thread
from serving.bench.matrix import Cell
from serving.runtime.engine_metrics import MetricsParseError, parse_engine_metrics

CHARS_PER_TOKEN = 4  # the filler's density (English prose, about 4 characters a token)
TIME_SCALE_HEADER = "x-cmpfleet-sim-time-scale"
PREFILL_SCALE_HEADER = "x-cmpfleet-sim-prefill-time-scale"
PREFILL_WALL_HEADER = "x-cmpfleet-sim-prefill-wall-s"
METER_EVERY_S = 0.2
_FILLER = (
    "The rig hums along the shelf while the riser cables carry every layer's activations "
    "from one card to the next, and the owner writes down what each setting did. "
)


class CardMeter(Protocol):
    """The cards' energy counters and draw now (NVML's, or the simulated rig's)."""

    def read(self) -> Mapping[int, tuple[float | None, float | None]]:
        """Per card index: (energy since driver load in mJ, draw in W); None where unknown."""
        ...


@dataclass(slots=True)
class StreamSample:
    """What one stream measured (wall seconds from the cell's start)."""

    sent_s: float
    first_s: float | None = None
    token_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    time_scale: float = 1.0
    prefill_scale: float = 1.0
    prefill_wall_s: float | None = None
    error: str | None = None


@dataclass(slots=True)
class Metering:
    """The cards over one cell: energy at the start and end, draw samples meanwhile."""

    start_mj: dict[int, float] = field(default_factory=dict)
    end_mj: dict[int, float] = field(default_factory=dict)
    draws_w: dict[int, list[float]] = field(default_factory=dict)

    def add(self, reading: Mapping[int, tuple[float | None, float | None]], end: bool) -> None:
        """One reading of every card."""
        for card, (energy_mj, draw_w) in reading.items():
            if energy_mj is not None:
                if card not in self.start_mj:
                    self.start_mj[card] = energy_mj
                if end:
                    self.end_mj[card] = energy_mj
            if draw_w is not None:
                self.draws_w.setdefault(card, []).append(draw_w)


@dataclass(slots=True)
class CellRun:
    """A finished cell's raw measurements."""

    cell: Cell
    streams: list[StreamSample]
    metering: Metering
    wall_s: float
    accepted_before: tuple[float, float] | None = None
    accepted_after: tuple[float, float] | None = None


def prompt_for(depth_tokens: int, tag: str) -> str:
    """A prompt of about ``depth_tokens`` tokens beginning with a prefix no one else has."""
    head = f"[bench {tag} {secrets.token_hex(8)}] "
    chars = max(depth_tokens * CHARS_PER_TOKEN - len(head), 0)
    body = (_FILLER * (chars // len(_FILLER) + 1))[:chars]
    return head + body


def request_body(model: str, prompt: str, cell: Cell, output_tokens: int) -> dict[str, object]:
    """The streamed chat request of one stream."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": cell.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _scale(headers: httpx.Headers, name: str) -> float:
    try:
        value = float(headers.get(name, "1"))
    except ValueError:
        return 1.0
    return value if value > 0 else 1.0


def _stream(
    client: httpx.Client,
    url: str,
    body: dict[str, object],
    sample: StreamSample,
    origin_s: float,
    stop: threading.Event,
    timeout_s: float,
) -> None:
    try:
        with client.stream("POST", url, json=body, timeout=timeout_s) as response:
            if response.status_code != 200:
                response.read()
                sample.error = f"HTTP {response.status_code}: {response.text[:200]}"
                return
            sample.time_scale = _scale(response.headers, TIME_SCALE_HEADER)
            sample.prefill_scale = _scale(response.headers, PREFILL_SCALE_HEADER)
            if PREFILL_WALL_HEADER in response.headers:
                sample.prefill_wall_s = _scale(response.headers, PREFILL_WALL_HEADER)
            for line in response.iter_lines():
                if stop.is_set():
                    sample.error = "stopped"
                    return
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage")
                if isinstance(usage, dict):
                    sample.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                    sample.completion_tokens = int(usage.get("completion_tokens") or 0)
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        now = time.monotonic() - origin_s
                        if sample.first_s is None:
                            sample.first_s = now
                        sample.token_s.append(now)
    except (httpx.HTTPError, ValueError) as exc:
        sample.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _acceptance_counters(client: httpx.Client, base_url: str) -> tuple[float, float] | None:
    """(draft tokens, accepted tokens) from the engine's ``/metrics``; None without drafts."""
    try:
        response = client.get(f"{base_url}/metrics", timeout=5.0)
        reading = parse_engine_metrics(response.text)
    except (httpx.HTTPError, MetricsParseError):
        return None
    drafted = reading.counters.get("spec_draft_tokens")
    accepted = reading.counters.get("spec_accepted_tokens")
    if drafted is None or accepted is None:
        return None
    return (drafted, accepted)


def run_cell(
    base_url: str,
    model: str,
    cell: Cell,
    output_tokens: int,
    tag: str,
    stop: threading.Event,
    meter: CardMeter | None,
    timeout_s: float = 900.0,
    started: Callable[[], None] | None = None,
) -> CellRun:
    """Run ``cell``: its streams at once; the cards metered every 0.2 s until the last ends."""
    url = f"{base_url}/v1/chat/completions"
    limits = httpx.Limits(max_connections=cell.concurrency + 2)
    metering = Metering()
    with httpx.Client(limits=limits, trust_env=False) as client:
        before = _acceptance_counters(client, base_url)
        if meter is not None:
            metering.add(meter.read(), end=False)
        origin_s = time.monotonic()
        samples = [StreamSample(sent_s=0.0) for _ in range(cell.concurrency)]
        bodies = [
            request_body(model, prompt_for(cell.depth_tokens, f"{tag}-{i}"), cell, output_tokens)
            for i in range(cell.concurrency)
        ]
        if started is not None:
            started()
        threads = [
            run_in_thread(
                f"bench-{index}",
                functools.partial(_stream, client, url, body, sample, origin_s, stop, timeout_s),
            )
            for index, (body, sample) in enumerate(zip(bodies, samples, strict=True))
        ]
        for thread in threads:
            while not thread.join(METER_EVERY_S):
                if meter is not None:
                    metering.add(meter.read(), end=False)
        wall_s = time.monotonic() - origin_s
        if meter is not None:
            metering.add(meter.read(), end=True)
        after = _acceptance_counters(client, base_url)
    return CellRun(cell, samples, metering, wall_s, before, after)
