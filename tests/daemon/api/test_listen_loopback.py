"""Which ``--listen`` hosts count as loopback (and so serve reads without the token).

A wrong "yes" opens the whole API to the network, so the address is parsed, never judged
by how its text starts: ``127.example.org`` is a name its owner points anywhere.
"""

from __future__ import annotations

import pytest

from daemon.api.server import split_listen
from web.loopback import is_loopback


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1:8170", True),
        ("127.3.2.1:8170", True),
        ("localhost:8170", True),
        ("[::1]:8170", True),
        ("0.0.0.0:8170", False),
        ("[::]:8170", False),
        ("192.168.1.20:8170", False),
        ("127.example.org:8170", False),
        ("127.0.0.1.nip.io:8170", False),
        ("rig1.lan:8170", False),
    ],
)
def test_only_loopback_addresses_are_loopback(listen: str, loopback: bool) -> None:
    host, _ = split_listen(listen)
    assert is_loopback(host) is loopback
