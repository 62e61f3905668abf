"""Client keys: made once, shown once, stored only as a salted SHA-256 hash.

A key is 32 random bytes (``cmpg-`` and URL-safe base64), so a fast salted hash is enough:
there is nothing to guess by brute force, and checking a request costs microseconds (a
slow KDF would put milliseconds of CPU in front of every request). The config holds
``sha256:<salt hex>:<digest hex>`` per key; the guard compares in constant time and keeps
no key text anywhere (logs, counters and the UI name the key by its ``name``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

KEY_PREFIX = "cmpg-"
SALT_BYTES = 16
KEY_BYTES = 32
MIN_KEY_CHARS = 24  # a key a person brings must not be guessable either
MAX_KEY_CHARS = 1024  # far above any real key; a header line must stay small
# What an ``Authorization: Bearer KEY`` header can carry as one token: visible ASCII.
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")


class UnusableKey(ValueError):
    """A key that cannot be used (too short); the message is one line."""


def new_key() -> str:
    """A fresh client key."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def _digest(salt: bytes, key: str) -> bytes:
    return hashlib.sha256(salt + key.encode()).digest()


def hash_key(key: str, salt: bytes | None = None) -> str:
    """The config's form of ``key``: ``sha256:<salt hex>:<digest hex>``."""
    if len(key) < MIN_KEY_CHARS:
        raise UnusableKey(f"a key needs at least {MIN_KEY_CHARS} characters (got {len(key)})")
    if len(key) > MAX_KEY_CHARS:
        raise UnusableKey(f"a key has at most {MAX_KEY_CHARS} characters (got {len(key)})")
    if not _KEY_CHARS.fullmatch(key):
        raise UnusableKey(
            "a key is visible ASCII characters only (no spaces, control characters or NUL): "
            "a client sends it in an HTTP header"
        )
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return f"sha256:{salt.hex()}:{_digest(salt, key).hex()}"


@dataclass(frozen=True, slots=True)
class _Stored:
    name: str
    salt: bytes
    digest: bytes


class KeyRing:
    """The configured keys; ``name_of`` says whose a presented key is."""

    def __init__(self, keys: Iterable[tuple[str, str]]) -> None:
        stored: list[_Stored] = []
        for name, hashed in keys:
            _, salt_hex, digest_hex = hashed.split(":")
            stored.append(_Stored(name, bytes.fromhex(salt_hex), bytes.fromhex(digest_hex)))
        self._keys = tuple(stored)

    @property
    def enabled(self) -> bool:
        """True when keys are configured (requests then need one)."""
        return bool(self._keys)

    @property
    def names(self) -> tuple[str, ...]:
        """The keys' names, in config order."""
        return tuple(key.name for key in self._keys)

    def name_of(self, presented: str) -> str | None:
        """The name of the key ``presented`` is, or None (every key is compared)."""
        found = None
        for key in self._keys:
            if hmac.compare_digest(_digest(key.salt, presented), key.digest):
                found = key.name
        return found


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
