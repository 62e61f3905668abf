"""The ``X-Cmpfleet-Signature`` header: ``sha256=<hex HMAC-SHA256 of the raw body>``.

The receiver recomputes the HMAC over the exact bytes it received with the shared secret
and compares in constant time (``verify``; docs/reference.md "Alerting" has a receiver's
version), so a forged or altered request is refused. The secret itself never leaves this process.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Cmpfleet-Signature"
PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The header value for ``body``."""
    return PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """True when ``header`` is the signature of ``body`` under ``secret``."""
    if header is None or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body), header)
