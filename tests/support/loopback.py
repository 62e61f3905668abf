"""HTTP from a test to the daemons, engines and servers it started: plain HTTP on loopback.

Why not ``httpx.get``: it builds a client for each call, and each client loads certifi's CA
bundle into a TLS context (measured: 24 ms of CPU a request against 1 ms here). A test that
polls a daemon 20 times a second that way spends half a core on certificates it never
uses, and on 2 cores the whole suite paid for it. These servers never speak TLS, so each
request gets a client without the bundle; it holds no connection afterwards (nothing to
close, nothing left open when a test kills the daemon).
"""

from __future__ import annotations

from typing import Any

import httpx

DEFAULT_TIMEOUT_S = 10.0


def request(
    method: str, url: str, *, timeout: float = DEFAULT_TIMEOUT_S, **kwargs: Any
) -> httpx.Response:
    """One request to a plain-HTTP URL (``ValueError`` for any other scheme)."""
    if not url.startswith("http://"):
        raise ValueError(f"loopback requests are plain HTTP, not {url!r}")
    # verify=False: no TLS context at all (the scheme is checked above: nothing to verify).
    with httpx.Client(verify=False, timeout=timeout, trust_env=False) as client:  # noqa: S501
        return client.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    """``GET url`` (``params``, ``headers``, ``timeout`` as httpx takes them)."""
    return request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    """``POST url`` (``json``, ``content``, ``headers``, ``timeout`` as httpx takes them)."""
    return request("POST", url, **kwargs)
