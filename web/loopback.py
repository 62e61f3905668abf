"""Is a host this machine? One answer for the listener, its Host check and fleetctl's token.

All three trust loopback: fleetd serves reads without the token only on a loopback
listener, which answers only to loopback ``Host`` names (``web.hosts``), and fleetctl
offers the local state dir's token only to a loopback URL. It lives in ``web`` (the lower
layer) so the daemon and the web app share it. A wrong
"yes" opens the API to the network or sends the token to another machine, so the address
is parsed, never judged by how its text starts.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost: only then may the API skip the token.

    Judged on the parsed address, never on how the text starts: a host name such as
    ``127.example.org`` resolves wherever its owner likes and must not open the API.
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # any other name: it may resolve off this machine, so the token is needed
