"""The traffic guard's cost: direct to the engine vs through the guard vs through nginx.

Starts the simulated engine (paced at --tokens-per-s per stream, --max-num-seqs 64 so no
request queues), the guard in front of it (pins and the reasoning mirror on: the work a
real config asks for) and, when Debian's nginx is installed, nginx in front of it too
(``proxy_pass`` with ``proxy_buffering off``, upstream keepalive: a plain streaming reverse
proxy, the yardstick). Then, for 1 and 8 concurrent streaming clients, each client sends
chat completions (stream, ``ignore_eos``, --max-tokens) one after another for --seconds, and
the bench prints per target: time to first byte p50/p99, chunks per second (all clients),
and the proxy's CPU per request (user+system of its processes, over the requests).

The time to first byte is sampled on one-token replies (many samples: a p99 that means
something), chunks/s and CPU on --max-tokens replies with thinking on (as the guard's pin
sets it, so every target generates the same reply). The guard runs the real config: pins, the
mirror, history hygiene and salvage on. Targets: the guard adds under 2 ms to the p99 time
to first byte at 1 and 8 clients, spends at most 2x nginx's CPU per stream, answers a
one-token non-streaming chat within 10 ms of direct (median), and streams at least
95% of direct's chunks per second. On a small machine every process shares
the same cores (engine, proxy and clients), so CPU per request is the figure that travels.

    python bench/guard_overhead.py [--seconds 8] [--tokens-per-s 100] [--max-tokens 48]
                                   [--no-repairs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
GUARD_SETTINGS = {
    "mirror_reasoning": "reasoning_content",
    "pin": {"chat_template_kwargs": {"thinking": True, "reasoning_effort": "max"}},
    # The real config: history hygiene (the default) and salvage on (every request declares
    # a tool, so each stream is watched for markup from its first delta).
    "repair": {"history": "clean", "salvage_tool_calls": True},
}
CLIENTS = (1, 8)  # 8: the recipe's max-num-seqs
TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
NGINX_CONF = """
daemon off;
master_process on;
worker_processes 1;
user root;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream engine {{ server 127.0.0.1:{engine}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


async def wait_http(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url) as answer:
                    if answer.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not answer within {timeout_s} s")


@dataclass
class Run:
    target: str
    clients: int
    ttfb_s: list[float]
    chunks: int
    requests: int
    wall_s: float
    cpu_s: float | None

    def line(self) -> str:
        per_request = (
            "" if self.cpu_s is None else f"{1000 * self.cpu_s / max(self.requests, 1):7.2f} ms"
        )
        return (
            f"{self.target:<7} {self.clients:>3} clients  TTFB p50 {1000 * statistics.median(self.ttfb_s):6.2f} ms"
            f"  p99 {1000 * percentile(self.ttfb_s, 99):6.2f} ms  {self.chunks / self.wall_s:8.0f} chunks/s"
            f"  {self.requests:5d} streams  proxy CPU/stream {per_request or '    n/a'}"
        )


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for each in procs:
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


async def one_client(
    session: aiohttp.ClientSession, url: str, body: bytes, until: float, run: Run
) -> None:
    while time.monotonic() < until:
        began = time.monotonic()
        async with session.post(
            url, data=body, headers={"Content-Type": "application/json"}
        ) as answer:
            first = True
            async for data in answer.content.iter_any():
                if first:
                    run.ttfb_s.append(time.monotonic() - began)
                    first = False
                run.chunks += data.count(b"data: ")
        run.requests += 1


def chat_body(max_tokens: int, thinking: bool, stream: bool = True) -> bytes:
    body: dict[str, object] = {
        "model": "m",
        "stream": stream,
        "ignore_eos": True,
        "max_tokens": max_tokens,
        # An agent's turn: a history for the hygiene to read, a tool for salvage to watch
        # (``tool_choice: none`` so the engine still streams text).
        "messages": [
            {"role": "user", "content": "Read the notes."},
            {"role": "assistant", "content": "I read them: <b>three</b> items are open."},
            {"role": "user", "content": "Stream a steady answer."},
        ],
        "tools": [TOOL],
        "tool_choice": "none",
    }
    if thinking:  # as the guard's pin would set it: every target generates the same reply
        body["chat_template_kwargs"] = {"thinking": True, "reasoning_effort": "max"}
    return json.dumps(body).encode()


async def phase(
    session: aiohttp.ClientSession, url: str, body: bytes, clients: int, seconds: float, run: Run
) -> None:
    until = time.monotonic() + seconds
    await asyncio.gather(*(one_client(session, url, body, until, run) for _ in range(clients)))


async def measure(
    target: str, base: str, clients: int, args: argparse.Namespace, pids: list[int]
) -> Run:
    """A TTFB phase (one-token replies: many samples), then a streaming phase (chunks/s, CPU)."""
    url = f"{base}/v1/chat/completions"
    run = Run(target, clients, [], 0, 0, 0.0, None)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await phase(
            session,
            url,
            chat_body(1, False),
            clients,
            0.5,
            Run(target, clients, [], 0, 0, 0.0, None),
        )
        first = Run(target, clients, [], 0, 0, 0.0, None)
        await phase(session, url, chat_body(1, False), clients, args.seconds / 2, first)
        run.ttfb_s = first.ttfb_s
        cpu_before = cpu_of(pids) if pids else None
        began = time.monotonic()
        await phase(session, url, chat_body(args.max_tokens, True), clients, args.seconds, run)
        run.wall_s = time.monotonic() - began
        if cpu_before is not None:
            run.cpu_s = cpu_of(pids) - cpu_before
    return run


async def whole_latency(base: str, requests: int) -> list[float]:
    """One-token non-streaming chats, one after another on one keep-alive connection."""
    url = f"{base}/v1/chat/completions"
    body = chat_body(1, False, stream=False)
    took: list[float] = []
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        for index in range(requests + 5):
            began = time.monotonic()
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as answer:
                await answer.read()
            if index >= 5:  # the first few warm the pools
                took.append(time.monotonic() - began)
    return took


def start_nginx(engine_port: int, workdir: Path) -> tuple[subprocess.Popen[bytes] | None, int, str]:
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        return None, 0, "nginx is not installed (apt-get install nginx): its row is left out"
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=workdir, engine=engine_port, port=port))
    proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(workdir)], stderr=subprocess.PIPE)
    version = subprocess.run(
        [binary, "-v"], capture_output=True, text=True, check=False
    ).stderr.strip()
    return proc, port, version


async def main_async(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="guard-bench-"))
    engine_port, guard_port = free_port(), free_port()
    engine = subprocess.Popen(
        [sys.executable, "-m", "serving.sim.engine", "serve", "m", "--port", str(engine_port),
         "--max-num-seqs", "64", "--sim-ready-after-s", "0", "--sim-reasoning-field", "reasoning",
         "--sim-tokens-per-s", str(args.tokens_per_s)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    settings = dict(GUARD_SETTINGS)
    if args.no_repairs:  # the repairs' own cost: the same run without them
        settings["repair"] = {"history": "off", "salvage_tool_calls": False}
    env = {**os.environ, "CMPFLEET_GUARDPROC_SETTINGS": json.dumps(settings)}
    guard = subprocess.Popen(
        [sys.executable, "-m", "serving.guard", "--listen", f"127.0.0.1:{guard_port}",
         "--engine-url", f"http://127.0.0.1:{engine_port}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    nginx, nginx_port, nginx_note = start_nginx(engine_port, workdir)
    try:
        await wait_http(f"http://127.0.0.1:{engine_port}/health")
        await wait_http(f"http://127.0.0.1:{guard_port}/health")
        targets = [
            ("direct", f"http://127.0.0.1:{engine_port}", []),
            ("guard", f"http://127.0.0.1:{guard_port}", [guard.pid]),
        ]
        if nginx is not None:
            await wait_http(f"http://127.0.0.1:{nginx_port}/health")
            targets.append(("nginx", f"http://127.0.0.1:{nginx_port}", [nginx.pid]))
        print(f"simulated engine at {args.tokens_per_s:g} tokens/s a stream, {args.max_tokens} tokens a reply, "
              f"{args.seconds:g} s a run on {os.cpu_count()} cores; {nginx_note}")  # fmt: skip
        print("TTFB: one-token replies for half the run; chunks/s and CPU: the streaming replies")
        whole = {name: await whole_latency(base, 200) for name, base, _ in targets}
        for name, took in whole.items():
            print(f"{name:<7} one-token non-streaming chat (keep-alive): median "
                  f"{1000 * statistics.median(took):6.2f} ms, p99 {1000 * percentile(took, 99):6.2f} ms")  # fmt: skip
        runs: dict[tuple[str, int], Run] = {}
        for clients in CLIENTS:
            for name, base, pids in targets:
                runs[(name, clients)] = run = await measure(name, base, clients, args, pids)
                print(run.line(), flush=True)
        gap = 1000 * (statistics.median(whole["guard"]) - statistics.median(whole["direct"]))
        print(
            f"guard: one-token non-streaming chat {gap:+.2f} ms against direct (median; target < 10 ms)"
        )
        for clients in CLIENTS:
            direct, through = runs[("direct", clients)], runs[("guard", clients)]
            added_p50 = 1000 * (
                statistics.median(through.ttfb_s) - statistics.median(direct.ttfb_s)
            )
            added = 1000 * (percentile(through.ttfb_s, 99) - percentile(direct.ttfb_s, 99))
            share = (through.chunks / through.wall_s) / (direct.chunks / direct.wall_s)
            print(f"guard at {clients:>2} clients: adds {added_p50:+.2f} ms to TTFB p50, {added:+.2f} ms to p99 "
                  f"(target < 2 ms), streams {share:.1%} of direct's chunks/s (target >= 95%)")  # fmt: skip
            proxy = runs.get(("nginx", clients))
            if proxy is not None and proxy.cpu_s and through.cpu_s is not None:
                ratio = (through.cpu_s / max(through.requests, 1)) / (
                    proxy.cpu_s / max(proxy.requests, 1)
                )
                print(
                    f"guard at {clients:>2} clients: CPU per stream {ratio:.2f}x nginx's (target <= 2x)"
                )
    finally:
        for proc in (guard, engine, nginx):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--no-repairs", action="store_true", help="history hygiene and salvage off (A/B)"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
