"""Hop-by-hop headers, the fixed ones and those a ``Connection:`` header names, stay on
their hop both ways (issue 36)."""

from __future__ import annotations

from typing import cast

import aiohttp

from serving.guard.upstream import forwarded_headers, named_in_connection, returned_headers


def test_headers_named_in_connection_are_not_forwarded() -> None:
    headers = [
        (b"connection", b"keep-alive, X-Hop-Secret ,x-other"),
        (b"x-hop-secret", b"v"),
        (b"X-Other", b"w"),
        (b"keep-alive", b"timeout=5"),
        (b"content-type", b"application/json"),
        (b"x-kept", b"k"),
    ]
    assert named_in_connection(headers) == {"keep-alive", "x-hop-secret", "x-other"}
    assert forwarded_headers(headers) == [
        ("content-type", "application/json"),
        ("x-kept", "k"),
    ]


def test_without_a_connection_header_only_the_fixed_list_goes() -> None:
    headers = [(b"te", b"trailers"), (b"upgrade", b"h2c"), (b"x-session-id", b"s")]
    assert forwarded_headers(headers) == [("x-session-id", "s")]


class _Answer:
    """What ``returned_headers`` reads of an engine's answer: its raw headers."""

    def __init__(self, raw_headers: list[tuple[bytes, bytes]]) -> None:
        self.raw_headers = raw_headers


def test_an_answers_connection_named_headers_stay_with_the_engine() -> None:
    answer = _Answer(
        [
            (b"Connection", b"X-Engine-Hop"),
            (b"X-Engine-Hop", b"1"),
            (b"content-length", b"2"),
            (b"content-type", b"application/json"),
        ]
    )
    kept = returned_headers(cast(aiohttp.ClientResponse, answer), keep_length=True)
    assert kept == [(b"content-length", b"2"), (b"content-type", b"application/json")]
