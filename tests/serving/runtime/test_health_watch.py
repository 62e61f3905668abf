"""The health watch's cadence: a starting engine is asked often, a ready one every interval."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from serving.runtime.health_watch import (
    READINESS_PROBE_S,
    BecameReady,
    HealthWatch,
    Healthy,
    StillStarting,
)
from serving.settings import ServingSettings, SupervisorTuning

SERVED = "dsv4s"


class Engine:
    """vLLM's two readiness answers: 503 while loading, then 200 and the served name."""

    def __init__(self) -> None:
        self.loaded = False
        self.asked: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(request.url.path)
        if not self.loaded:
            return httpx.Response(503)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": SERVED}]})
        return httpx.Response(200)


def watch_of(engine: Engine, probe_interval_s: float) -> HealthWatch:
    client = httpx.Client(transport=httpx.MockTransport(engine))
    watch = HealthWatch(
        client,
        ServingSettings(probe_interval_s=probe_interval_s),
        SupervisorTuning(),
        clock=lambda: 0.0,
    )
    record = SimpleNamespace(base_url="http://127.0.0.1:9", served_model_name=SERVED)
    handle: Any = SimpleNamespace(record=record)
    watch.attach(handle, now=100.0)
    return watch


def test_a_starting_engine_is_asked_every_second_and_a_ready_one_every_interval() -> None:
    engine = Engine()
    watch = watch_of(engine, probe_interval_s=5.0)
    now = 100.0
    watch.schedule_next(now, starting=True)
    assert watch.next_probe == now + READINESS_PROBE_S == 101.0
    assert isinstance(watch.probe(now, starting=True), StillStarting)
    engine.loaded = True
    now = watch.next_probe
    watch.schedule_next(now, starting=True)
    assert isinstance(watch.probe(now, starting=True), BecameReady)
    watch.became_ready(now)
    # Ready: liveness every probe_interval_s, as the reference says.
    watch.schedule_next(now, starting=False)
    assert watch.next_probe == now + 5.0
    assert isinstance(watch.probe(watch.next_probe, starting=False), Healthy)
    assert engine.asked == ["/health", "/health", "/v1/models", "/health"]


@pytest.mark.parametrize("probe_interval_s", [0.3, 1.0, 30.0])
def test_readiness_is_never_asked_less_often_than_the_interval(probe_interval_s: float) -> None:
    watch = watch_of(Engine(), probe_interval_s)
    assert watch.interval_s(starting=True) == min(probe_interval_s, READINESS_PROBE_S)
    assert watch.interval_s(starting=False) == probe_interval_s
