"""The guard's memory over streams that clients abort: RSS must stay flat.

Starts the simulated engine and the guard in front of it (one key, so every request is
accounted), then runs --aborts streaming chat completions that each hang up after the
first event (a client's Ctrl-C, an agent cancelling a turn), --clients at a time, each a
new conversation (a new session) or, with --same-session, one. The guard's RSS is
sampled every --every aborts after a warm-up; the bench prints the series and the growth
per abort after the warm-up (issue 36 measured about 16 KB an abort before the fix).
Target: under 1 KB an abort over 5,000 (the session book's bounded rows aside).

    python bench/guard_aborts.py [--aborts 5000] [--clients 16] [--every 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving.guard.keys import hash_key, new_key  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_http(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url) as answer:
                    if answer.status in (200, 401):
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not answer within {timeout_s} s")


async def abort_one(session: aiohttp.ClientSession, url: str, key: str, n: int, same: bool) -> None:
    words = "the same question" if same else f"question number {n}"
    body = {
        "model": "m",
        "stream": True,
        "max_tokens": 400,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": f"Answer {words} at length."}],
    }
    async with session.post(
        f"{url}/v1/chat/completions",
        data=json.dumps(body),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    ) as answer:
        await answer.content.readany()
        answer.close()  # hang up mid-stream: the connection goes, as a cancelled client's


async def main_async(args: argparse.Namespace) -> None:
    engine_port, guard_port = free_port(), free_port()
    key = new_key()
    engine = subprocess.Popen(
        [sys.executable, "-m", "serving.sim.engine", "serve", "m", "--port", str(engine_port),
         "--max-num-seqs", "256", "--sim-ready-after-s", "0", "--sim-tokens-per-s", "200"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    settings = {"keys": [{"name": "bench", "sha256": hash_key(key)}]}
    env = {**os.environ, "CMPFLEET_GUARDPROC_SETTINGS": json.dumps(settings)}
    guard = subprocess.Popen(
        [sys.executable, "-m", "serving.guard", "--listen", f"127.0.0.1:{guard_port}",
         "--engine-url", f"http://127.0.0.1:{engine_port}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{guard_port}"
    try:
        await wait_http(f"http://127.0.0.1:{engine_port}/health")
        await wait_http(f"{url}/health")
        process = psutil.Process(guard.pid)
        series: list[tuple[int, int]] = []
        done = 0
        connector = aiohttp.TCPConnector(limit=args.clients, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            total = args.warmup + args.aborts
            while done < total:
                batch = min(args.every, total - done)
                queue = iter(range(done, done + batch))

                async def worker(numbers=queue) -> None:  # type: ignore[no-untyped-def]
                    for n in numbers:
                        await abort_one(session, url, key, n, args.same_session)

                await asyncio.gather(*(worker() for _ in range(args.clients)))
                done += batch
                if done >= args.warmup:
                    series.append((done - args.warmup, process.memory_info().rss))
        print(f"{args.aborts} aborted streams after {args.warmup} warm-up, {args.clients} clients, "
              f"{'one session' if args.same_session else 'a new session each'}")  # fmt: skip
        for count, rss in series:
            print(f"  after {count:5d} aborts: guard RSS {rss / 2**20:7.1f} MiB")
        grown = series[-1][1] - series[0][1]
        per = grown / max(series[-1][0] - series[0][0], 1)
        print(f"growth: {grown / 2**20:+.1f} MiB, {per:+.0f} bytes an abort (target < 1024)")
    finally:
        for proc in (guard, engine):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--aborts", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--same-session", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
