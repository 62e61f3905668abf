"""Shared renders (``web.rendered``): one render serves many readers, and never a stale one.

The status document and /metrics are rendered once and served to every reader until
they age out or the state changes (a poll, a POST). These tests hold a render open on a
real thread (the thread pool) and check what concurrent and later readers get.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from tests.support.recorded_services import TOKEN, RecordedServices
from web.app import create_app
from web.rendered import RenderedDocument, invalidate_rendered


class Renders:
    """A render that counts its calls, can be held open, and can be told to fail."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()
        self.fail: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        with self._lock:
            self.calls += 1
            number = self.calls
        self.started.set()
        if not self.release.wait(10):
            raise AssertionError("the test never released the render")
        if self.fail is not None:
            raise self.fail
        return f"render {number}".encode()


def test_concurrent_readers_share_one_render() -> None:
    renders = Renders()
    renders.release.clear()
    document = RenderedDocument(renders, max_age_s=60)

    async def go() -> list[bytes]:
        readers = [asyncio.ensure_future(document.get()) for _ in range(25)]
        await asyncio.to_thread(renders.started.wait, 10)
        renders.release.set()
        return await asyncio.gather(*readers)

    bodies = asyncio.run(go())
    assert renders.calls == 1
    assert set(bodies) == {b"render 1"}


def test_a_render_is_reused_until_it_ages_out() -> None:
    renders = Renders()
    document = RenderedDocument(renders, max_age_s=0.2, stale_s=0.2)

    async def go() -> list[bytes]:
        first = await document.get()
        second = await document.get()
        await asyncio.sleep(0.3)
        return [first, second, await document.get()]

    assert asyncio.run(go()) == [b"render 1", b"render 1", b"render 2"]


def test_a_slightly_stale_render_is_served_while_a_fresh_one_runs() -> None:
    """Readers in a steady stream never wait on the clock: the refresh runs behind them."""
    renders = Renders()
    document = RenderedDocument(renders, max_age_s=0.1, stale_s=5)

    async def go() -> list[bytes]:
        first = await document.get()
        await asyncio.sleep(0.15)
        renders.release.clear()
        stale = await asyncio.wait_for(document.get(), 1)  # no wait on the held render
        also_stale = await asyncio.wait_for(document.get(), 1)
        renders.release.set()
        await asyncio.sleep(0.1)
        return [first, stale, also_stale, await document.get()]

    assert asyncio.run(go()) == [b"render 1", b"render 1", b"render 1", b"render 2"]
    assert renders.calls == 2  # one background refresh for both stale reads


def test_a_render_older_than_the_stale_window_makes_the_reader_wait() -> None:
    renders = Renders()
    document = RenderedDocument(renders, max_age_s=0.05, stale_s=0.1)

    async def go() -> list[bytes]:
        first = await document.get()
        await asyncio.sleep(0.2)
        return [first, await document.get()]

    assert asyncio.run(go()) == [b"render 1", b"render 2"]


def test_invalidate_makes_the_next_reader_wait_for_a_new_render() -> None:
    renders = Renders()
    document = RenderedDocument(renders, max_age_s=60)

    async def go() -> list[bytes]:
        first = await document.get()
        document.invalidate()
        return [first, await document.get(), await document.get()]

    assert asyncio.run(go()) == [b"render 1", b"render 2", b"render 2"]


def test_a_render_begun_before_an_invalidation_is_not_served_after_it() -> None:
    renders = Renders()
    renders.release.clear()
    document = RenderedDocument(renders, max_age_s=60)

    async def go() -> tuple[bytes, bytes]:
        early = asyncio.ensure_future(document.get())
        await asyncio.to_thread(renders.started.wait, 10)
        # The state changes while render 1 is still reading it (a poll ending, on its thread).
        await asyncio.to_thread(document.invalidate)
        late = asyncio.ensure_future(document.get())
        await asyncio.sleep(0.05)
        renders.release.set()
        return await early, await late

    early, late = asyncio.run(go())
    assert early == b"render 1"
    assert late == b"render 2"
    assert renders.calls == 2


def test_a_failed_render_fails_its_readers_and_the_next_reader_renders_again() -> None:
    renders = Renders()
    renders.fail = RuntimeError("store gone")
    document = RenderedDocument(renders, max_age_s=60)

    async def go() -> bytes:
        results = await asyncio.gather(document.get(), document.get(), return_exceptions=True)
        assert [str(r) for r in results] == ["store gone", "store gone"]
        renders.fail = None
        return await document.get()

    assert asyncio.run(go()) == b"render 2"


def test_a_reader_that_leaves_does_not_cancel_the_render_others_await() -> None:
    renders = Renders()
    renders.release.clear()
    document = RenderedDocument(renders, max_age_s=60)

    async def go() -> bytes:
        leaving = asyncio.ensure_future(document.get())
        staying = asyncio.ensure_future(document.get())
        await asyncio.to_thread(renders.started.wait, 10)
        leaving.cancel()
        renders.release.set()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        return await staying

    assert asyncio.run(go()) == b"render 1"
    assert renders.calls == 1


class CountingServices(RecordedServices):
    """The recorded status document, counting how often the app builds it."""

    def __init__(self) -> None:
        self.builds = 0

    def status_document(self) -> dict[str, Any]:
        self.builds += 1
        return super().status_document()


def test_the_status_route_builds_once_for_many_reads_and_again_after_a_post() -> None:
    services = CountingServices()
    app = create_app(services)
    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def go() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rig") as client:
            answers = await asyncio.gather(*(client.get("/api/v1/status") for _ in range(20)))
            assert {a.status_code for a in answers} == {200}
            counts = [services.builds]
            # A mutation: the client's next read must not be the render from before it.
            posted = await client.post("/api/v1/events/12/ack", headers=headers)
            assert posted.status_code == 200
            await client.get("/api/v1/status")
            counts.append(services.builds)
            # A GET that fails (404) changes nothing: the render is reused.
            assert (await client.get("/api/v1/nowhere")).status_code == 404
            await client.get("/api/v1/status")
            counts.append(services.builds)
            # What the daemon calls after each poll.
            invalidate_rendered(app)
            await client.get("/api/v1/status")
            counts.append(services.builds)
            return counts

    assert asyncio.run(go()) == [1, 2, 2, 3]
